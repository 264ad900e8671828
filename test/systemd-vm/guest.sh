#!/bin/bash
# Runs inside the VM of run.sh at boot, as root: docs/deploy.md's steps, then the blue/green
# hand-over blocks of docs/operations.md (/root/doc/handover-N.sh, taken from the doc by run.sh),
# then powers off. The log (/root/guest.log, read back by run.sh) ends with SELFTEST-OK or
# SELFTEST-FAIL.
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

# docs/operations.md, "With systemd: bunstr@blue and bunstr@green": its three blocks as written
# (the hand-over function; the switch from bunstr.service; an upgrade), each run while a client
# publishes (handover-client.js), which must reconnect and find every event it published stored.
unit() { systemctl show -p "$2" --value "$1"; }
listening_pid() { journalctl -u "$1" -o cat | grep -o 'listening on .*pid [0-9]*)$' | tail -1 | grep -o '[0-9]*)$' | tr -d ')'; }
client_start() {
  rm -f /root/handover.done
  BUN_BE_BUN=1 bunstr /root/handover-client.js "$1" > "/root/client-$1.log" 2>&1 &
  client=$!
  for _ in $(seq 40); do grep -q '^open$' "/root/client-$1.log" && break; sleep 0.25; done
  sleep 1   # some events on the old process first
}
client_end() {
  touch /root/handover.done
  wait "$client"; local rc=$?
  cat "/root/client-$1.log"
  check test "$rc" = 0
  check grep -q 'closes \[1012' "/root/client-$1.log"
}
# OLD NEW PID: OLD drained (SIGUSR2, exit 0, not restarted) and disabled; NEW listens, is enabled,
# and is the only unit wanted at boot; NEW shared the port with OLD's process PID.
handed_over() {
  check test "$(systemctl is-active "$1")" = inactive
  check test "$(unit "$1" Result)" = success
  check test "$(unit "$1" ExecMainStatus)" = 0
  check test "$(systemctl is-enabled "$1")" = disabled
  check test "$(systemctl is-active "$2")" = active
  check test "$(systemctl is-enabled "$2")" = enabled
  check test "$(unit "$2" NRestarts)" = 0
  check test "$(ls /etc/systemd/system/multi-user.target.wants/ | grep '^bunstr[@.]')" = "$2.service"
  check test "$(listening_pid "$2")" = "$(unit "$2" MainPID)"
  check journal_of "$1" 'SIGUSR2: draining for a restart'
  check journal_of "$2" "note: bunstr (pid $3) serves this database on port 7447; sharing the port"
  check wait_up
}
journal_of() { journalctl -u "$1" --no-pager -o cat | grep -qF -- "$2"; }
# A release directory whose bunstr-linux-x64 is FILE, with a SHA256SUMS line for it.
release_of() {
  mkdir -p "$1"
  cp "/root/release/$2" "$1/bunstr-linux-x64"
  (cd "$1" && sha256sum bunstr-linux-x64 > SHA256SUMS)
}

step "blue/green: the hand-over function"
cat /root/doc/handover-1.sh
source /root/doc/handover-1.sh
check test "$(type -t bunstr_handover)" = function

step "blue/green: from bunstr.service to bunstr@blue, a client publishing"
systemctl start bunstr; check wait_up
old_pid=$(prop MainPID)
check test -d /etc/systemd/system/bunstr.service.d   # the open files drop-in, to be moved
client_start 0
cd /root   # where packaging/ is
cat /root/doc/handover-2.sh
source /root/doc/handover-2.sh
client_end 0
handed_over bunstr bunstr@blue "$old_pid"
check test "$(sysctl -n net.ipv4.tcp_migrate_req)" = 1
check test ! -e /etc/systemd/system/bunstr.service.d
check grep -E '^Max open files +262144 +262144' /proc/$(unit bunstr@blue MainPID)/limits
check test "$(unit bunstr@blue Description)" = "bunstr Nostr relay (blue)"
check test -z "$(journalctl -u bunstr -o cat | grep -F 'tcp_migrate_req = 0')"

step "blue/green: upgrade, bunstr@blue -> bunstr@green"
release_of /root/release-2 bunstr-linux-x64
cd /root/release-2
old_pid=$(unit bunstr@blue MainPID)
client_start 1
cat /root/doc/handover-3.sh
source /root/doc/handover-3.sh
client_end 1
handed_over bunstr@blue bunstr@green "$old_pid"
check cmp /proc/$(unit bunstr@green MainPID)/exe /root/release/bunstr-linux-x64

step "blue/green: upgrade again, bunstr@green -> bunstr@blue"
release_of /root/release-3 bunstr-linux-x64-baseline
cd /root/release-3
old_pid=$(unit bunstr@green MainPID)
client_start 2
source /root/doc/handover-3.sh
client_end 2
handed_over bunstr@green bunstr@blue "$old_pid"
check cmp /proc/$(unit bunstr@blue MainPID)/exe /root/release/bunstr-linux-x64-baseline
# One live claim, the new instance's: the drained ones removed theirs; a claim of a process that is
# gone (the crash step's kill -9 above leaves one) is ignored by design (docs/operations.md).
live=0
for f in /var/lib/bunstr/bunstr.sqlite.serving.*; do [ -d "/proc/${f##*.}" ] && live=$((live + 1)); done
check test "$live" = 1
check test -e "/var/lib/bunstr/bunstr.sqlite.serving.$(unit bunstr@blue MainPID)"

step "blue/green: an upgrade whose new instance cannot start (a broken config): the old one serves on"
cp /etc/bunstr/config.toml /root/config.good
echo 'this is not TOML' >> /etc/bunstr/config.toml
pid=$(unit bunstr@blue MainPID)
started=$(date +%s)
source /root/doc/handover-3.sh; rc=$?
echo "the block returned $rc after $(( $(date +%s) - started )) s"
check test "$rc" != 0
check test "$(unit bunstr@blue MainPID)" = "$pid"
check test "$(systemctl is-active bunstr@green)" = inactive
check test "$(systemctl is-failed bunstr@green)" != failed
check test "$(systemctl is-enabled bunstr@blue)" = enabled
check test "$(systemctl is-enabled bunstr@green)" = disabled
check wait_up
out=$(BUN_BE_BUN=1 bunstr /root/client.js read); echo "$out"
check grep -q '"EVENT","r"' <<<"$out"
cp /root/config.good /etc/bunstr/config.toml
source /root/doc/handover-3.sh
check test "$(systemctl is-active bunstr@green)" = active
check test "$(systemctl is-enabled bunstr@green)" = enabled
check test "$(systemctl is-active bunstr@blue)" = inactive
systemctl list-units --no-pager 'bunstr*'
set +x
if [ "$failed" = 0 ]; then echo SELFTEST-OK; else echo SELFTEST-FAIL; fi
sync
systemctl poweroff
