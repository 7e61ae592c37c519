#!/usr/bin/env bash
# Start the local PostgreSQL, MariaDB and Redis servers the test suite talks to, if they are installed and
# stopped (the commands of this machine kind's documentation). Does nothing where they already run.
set -u
if command -v pg_lsclusters >/dev/null 2>&1; then
  if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    echo "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  fi
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null && break; sleep 1; done
fi
if [ -x /usr/sbin/mariadbd ]; then
  if ! mariadb-admin -uroot ping >/dev/null 2>&1; then
    echo "starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || true
  fi
  for _ in $(seq 1 30); do mariadb-admin -uroot ping >/dev/null 2>&1 && break; sleep 1; done
fi
if command -v redis-server >/dev/null 2>&1; then
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "starting Redis"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
exit 0
