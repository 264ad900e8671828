#!/bin/bash
# Runs inside the VM of run.sh at boot, as root: docs/deploy.md's steps, then powers off. The log
# (/root/guest.log, read back by run.sh) ends with SELFTEST-OK or SELFTEST-FAIL.
exec > /root/guest.log 2>&1
set -x
failed=0
step() { set +x; echo; echo "=== $*"; set -x; }
check() { if "$@"; then :; else set +x; echo "CHECK FAILED: $*"; failed=1; set -x; fi; }
# NIP-11 answers once bunstr listens (systemd calls it active as soon as it has started).
wait_up() { for _ in $(seq 1 60); do curl -sf -o /dev/null -H 'Accept: application/nostr+json' http://127.0.0.1:7447/ && return 0; sleep 0.5; done; return 1; }
journal_has() { journalctl -u bunstr --no-pager -o cat | grep -qF -- "$1"; }
prop() { systemctl show -p "$1" --value bunstr; }

cd /root/release
step "verify and install"
check sha256sum -c --ignore-missing SHA256SUMS
install -m 0755 bunstr-linux-x64 /usr/local/bin/bunstr
check bunstr --version
useradd --system --home-dir /var/lib/bunstr --shell /usr/sbin/nologin bunstr
install -d -m 0755 /etc/bunstr
bunstr config init > /etc/bunstr/config.toml
sed -i 's|^#data_directory = .*|data_directory = "/var/lib/bunstr"|' /etc/bunstr/config.toml
check bunstr config check /etc/bunstr/config.toml
install -m 0644 /root/packaging/config.toml /etc/bunstr/config.toml   # the reverse-proxy setup
check bunstr config check /etc/bunstr/config.toml
install -m 0644 /root/packaging/bunstr.service /etc/systemd/system/bunstr.service
check systemd-analyze verify /etc/systemd/system/bunstr.service
systemctl daemon-reload
systemctl enable --now bunstr
check wait_up

step "running"
systemctl status --no-pager bunstr
pid=$(prop MainPID)
check journal_has "signatures: native libsecp256k1 (embedded)"
check grep -E '^Max open files +65536 +65536' /proc/$pid/limits
check test "$(ps -o user= -p $pid)" = bunstr
check test -f /var/lib/bunstr/bunstr.sqlite
curl -s -H 'Accept: application/nostr+json' http://127.0.0.1:7447/; echo

step "publish (a good and a forged signature)"
out=$(BUN_BE_BUN=1 bunstr /root/client.js); echo "$out"
check grep -q '",true,""\]' <<<"$out"
check grep -q 'false,"invalid:' <<<"$out"
# the verify workers loaded the embedded library from the service's private /tmp
grep secp256k1 /proc/$pid/maps | awk '{print $6}' | sort -u
check grep -q '/tmp/bunstr-libsecp256k1-' /proc/$pid/maps
check test -z "$(ls /tmp | grep bunstr-libsecp256k1)"

step "maintenance as the service user"
check runuser -u bunstr -- bunstr stats --config /etc/bunstr/config.toml
check runuser -u bunstr -- bunstr backup /var/lib/bunstr/backup.sqlite --config /etc/bunstr/config.toml

step "reload (SIGHUP)"
sed -i 's/^name = "example relay"/name = "renamed relay"/' /etc/bunstr/config.toml
systemctl reload bunstr; sleep 2
check test "$(prop MainPID)" = "$pid"
check grep -q '"name":"renamed relay"' <(curl -s -H 'Accept: application/nostr+json' http://127.0.0.1:7447/)
check journal_has 'SIGHUP: config reloaded'

step "restart (SIGTERM, clean stop)"
systemctl restart bunstr; check wait_up
check test "$(prop MainPID)" != "$pid"
check journal_has 'SIGTERM: shutting down'
check test "$(prop NRestarts)" = 0

step "crash -> Restart=on-failure"
systemctl kill -s SIGKILL bunstr; sleep 3; check wait_up
check test "$(prop NRestarts)" = 1

step "open files drop-in"
mkdir -p /etc/systemd/system/bunstr.service.d
printf '[Service]\nLimitNOFILE=262144\n' > /etc/systemd/system/bunstr.service.d/limits.conf
systemctl daemon-reload && systemctl restart bunstr
check wait_up
check grep -E '^Max open files +262144 +262144' /proc/$(systemctl show -p MainPID --value bunstr)/limits

step "upgrade"
runuser -u bunstr -- bunstr backup /var/lib/bunstr/backup-$(date +%F).sqlite --config /etc/bunstr/config.toml
check sha256sum -c --ignore-missing SHA256SUMS
cp bunstr-linux-x64-baseline bunstr-linux-x64   # stands in for a new release
install -m 0755 bunstr-linux-x64 /usr/local/bin/bunstr.new
mv /usr/local/bin/bunstr.new /usr/local/bin/bunstr
systemctl restart bunstr
check wait_up
journalctl -u bunstr -o cat -n 5 --no-pager
check cmp /usr/local/bin/bunstr /root/release/bunstr-linux-x64-baseline
out=$(BUN_BE_BUN=1 bunstr /root/client.js read); echo "$out"
check grep -q '"EVENT","r"' <<<"$out"

step "stop"
systemctl stop bunstr
check test "$(prop Result)" = success
check test "$(prop ExecMainStatus)" = 0
journalctl -u bunstr --no-pager -o cat -n 4

step "security"
systemd-analyze security --no-pager bunstr | tail -1
set +x
if [ "$failed" = 0 ]; then echo SELFTEST-OK; else echo SELFTEST-FAIL; fi
sync
systemctl poweroff
