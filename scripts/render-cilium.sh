#!/usr/bin/env bash
# Renders manifests/cilium/cilium.yaml, the network plugin the kubeadm backend installs, from upstream
# Constellation's Cilium chart (edgelesssys/constellation@7cb5b83, internal/constellation/helm/charts/cilium,
# Cilium 1.15.19-edg.0 with image digests pinned in values.yaml) and manifests/cilium/values.yaml.
# Not run by the build or the tests: the rendered manifest is committed. Needs helm 3 (rendered with v3.17.3).
#   scripts/render-cilium.sh <path to helm> <path to the chart directory>
set -euo pipefail
helm=$1
chart=$2
here=$(cd "$(dirname "$0")/.." && pwd)
out=$here/manifests/cilium/cilium.yaml
{
  echo "# Rendered by scripts/render-cilium.sh with $("$helm" version --short) from upstream Constellation's Cilium chart"
  echo "# (edgelesssys/constellation@7cb5b83 internal/constellation/helm/charts/cilium, $(grep '^version:' "$chart/Chart.yaml"))"
  echo "# and manifests/cilium/values.yaml. Do not edit: change the values and render again."
  "$helm" template cilium "$chart" --namespace kube-system --kube-version 1.31.0 -f "$here/manifests/cilium/values.yaml"
} > "$out.tmp"
mv "$out.tmp" "$out"
