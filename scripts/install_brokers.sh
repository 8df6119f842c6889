#!/usr/bin/env bash
# Install the brokers measured by calibration/harness (Debian/Ubuntu, as root).
#
#   scripts/install_brokers.sh          mosquitto + nats-server
#   scripts/install_brokers.sh --rabbitmq  ... + rabbitmq-server (heavy: Erlang)
#   scripts/install_brokers.sh --tier2  ... + activemq, libmqtt-client-java, ejabberd
#                                       (heavy: Java and Erlang; second-tier brokers)
#   scripts/install_brokers.sh --all    all of the above
#   PUBSIM_WITH_RABBITMQ=1 / PUBSIM_WITH_TIER2=1   same as --rabbitmq / --tier2
#
# libmqtt-client-java: Debian's activemq ships the MQTT transport
# (activemq-mqtt.jar) without the FuseSource MQTT codec it loads at run time.
#
# Idempotent: packages already installed are skipped, and apt-get update runs
# at most once. The system services these packages may start are stopped:
# the harness starts its own brokers on free loopback ports.
set -euo pipefail

with_rabbitmq=${PUBSIM_WITH_RABBITMQ:-0}
with_tier2=${PUBSIM_WITH_TIER2:-0}
for arg in "$@"; do
    case "$arg" in
        --all) with_rabbitmq=1; with_tier2=1 ;;
        --rabbitmq) with_rabbitmq=1 ;;
        --tier2) with_tier2=1 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "install_brokers.sh: unknown argument: $arg (expected --rabbitmq, --tier2 or --all)" >&2; exit 2 ;;
    esac
done

packages=(mosquitto nats-server)
[ "$with_rabbitmq" = 1 ] && packages+=(rabbitmq-server)
[ "$with_tier2" = 1 ] && packages+=(activemq libmqtt-client-java ejabberd)

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }

missing=()
for pkg in "${packages[@]}"; do
    installed "$pkg" || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "install_brokers.sh: need root and apt-get to install: ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    echo "installing: ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    echo "already installed: ${packages[*]}"
fi

# Stop and disable the system services the packages may have started (there
# is no systemd in containers). Only the system daemons are matched (their
# /etc config file or service user), never brokers started by the harness.
stop_service() {  # service, pgrep arguments matching its daemon
    local service=$1; shift
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        systemctl disable --now "$service" >/dev/null 2>&1 || true
    elif command -v update-rc.d >/dev/null && [ -e "/etc/init.d/$service" ]; then
        update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
    pgrep "$@" >/dev/null || return 0
    service "$service" stop >/dev/null 2>&1 || true
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        pgrep "$@" >/dev/null || break
        [ "$i" = 2 ] && pkill "$@" 2>/dev/null || true
        sleep 0.5
    done
    pgrep "$@" >/dev/null && { pkill -KILL "$@" 2>/dev/null || true; sleep 0.5; }
    if pgrep "$@" >/dev/null; then
        echo "install_brokers.sh: could not stop the system $service" >&2
        return 1
    fi
    echo "stopped system service $service"
}
installed mosquitto && stop_service mosquitto -f '^/usr/sbin/mosquitto -c /etc/mosquitto/mosquitto.conf'
installed nats-server && stop_service nats-server -f '^/usr/sbin/nats-server -c /etc/nats-server.conf'
installed rabbitmq-server && stop_service rabbitmq-server -u rabbitmq
installed activemq && stop_service activemq -u activemq
installed ejabberd && stop_service ejabberd -u ejabberd

echo "versions:"
command -v mosquitto >/dev/null || PATH=$PATH:/usr/sbin
echo "  mosquitto:       $(mosquitto -h 2>/dev/null | head -n1 | awk '{print $3}')"
echo "  nats-server:     $(nats-server --version 2>/dev/null | sed "s/^nats-server: v//")"
if installed rabbitmq-server; then
    echo "  rabbitmq-server: $(dpkg-query -W -f='${Version}' rabbitmq-server)"
else
    echo "  rabbitmq-server: not installed (use --rabbitmq or --all)"
fi
for pkg in activemq ejabberd; do
    if installed "$pkg"; then
        printf '  %-16s %s\n' "$pkg:" "$(dpkg-query -W -f='${Version}' "$pkg")"
    else
        printf '  %-16s not installed (use --tier2 or --all)\n' "$pkg:"
    fi
done
