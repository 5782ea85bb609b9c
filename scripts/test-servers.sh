#!/usr/bin/env bash
# Installs the servers the test suite starts itself, when they are missing: a JDK (DynamoDB Local),
# PostgreSQL, MariaDB, NATS, RabbitMQ, Prometheus (promtool) and Chromium (the dashboard's browser
# tests). Debian/Ubuntu packages through apt-get, as root or through sudo. Run by `npm test` and by
# .ci/run, so a fresh machine needs nothing installed by hand. Prints nothing when all is there.
set -euo pipefail

packages=()
{ command -v javac >/dev/null 2>&1 && java -version >/dev/null 2>&1; } || packages+=(openjdk-17-jdk-headless)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || packages+=(postgresql)
command -v mariadbd >/dev/null 2>&1 || command -v mysqld >/dev/null 2>&1 || packages+=(mariadb-server)
command -v nats-server >/dev/null 2>&1 || packages+=(nats-server)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || packages+=(rabbitmq-server)
{ command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || packages+=(prometheus)
command -v chromium >/dev/null 2>&1 || packages+=(chromium)

[ ${#packages[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  run() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
  run() { sudo "$@"; }
else
  echo "test servers missing (${packages[*]}): install them with apt-get as root, or run as a user with sudo" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "test servers missing (${packages[*]}) and no apt-get here: install these Debian packages' equivalents" >&2
  exit 1
fi

echo "installing the test servers: ${packages[*]}"
export DEBIAN_FRONTEND=noninteractive
run apt-get update -qq
run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# Debian's packages may start system services; the tests start their own on free loopback ports.
if command -v systemctl >/dev/null 2>&1; then
  for service in rabbitmq-server mariadb prometheus prometheus-node-exporter postgresql nats-server; do
    run systemctl disable --now "$service" >/dev/null 2>&1 || true
  done
fi
for service in rabbitmq-server mariadb prometheus prometheus-node-exporter postgresql; do
  if [ -x "/etc/init.d/$service" ]; then run "/etc/init.d/$service" stop >/dev/null 2>&1 || true; fi
done
exit 0
