#!/usr/bin/env bash
# Debian packages the test suite drives for real: Prometheus and promtool, the Pushgateway,
# kcat (an independent Kafka client), Java + Maven for the Kafka broker (kafka/kafka-up.sh), and
# Chromium with its driver for the live page's browser test (the system browser, never a download),
# openssl for the certificates of the secured test broker (kafka-up.sh KAFKA_SECURE=1).
# Installs only what is missing; does nothing when everything is there.
set -euo pipefail

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || need+=(prometheus-pushgateway)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v openssl >/dev/null 2>&1 || need+=(openssl)  # the secured test broker's certificates

if ((${#need[@]} == 0)); then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "installing Debian packages: ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
  $(printf '%s\n' "${need[@]}" | sort -u) >&2
