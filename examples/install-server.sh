#!/bin/sh
# Install cronvisor on a Debian/Ubuntu server from a packed tarball, as root:
#
#   npm ci && npm pack                                   # in a clone: makes cronvisor-X.tgz
#   sudo sh examples/install-server.sh ./cronvisor-*.tgz
#
# 1. npm installs the package into PREFIX (default /usr/local): a copy, not a link into the
#    clone, so the clone can go. The command is PREFIX/bin/cronvisor.
# 2. The config: ETC/cronvisor/jobs.yaml (ETC default /etc), from examples/jobs.server.yaml
#    unless there is one already; its state_dir is STATE (default /var/lib/cronvisor).
# 3. The systemd unit: ETC/systemd/system/cronvisor.service, its ExecStart this install's
#    cronvisor and this config; its StateDirectory= is the state dir's (systemd makes it).
# 4. `cronvisor validate` of the config. Nothing is enabled or started: that is yours to do,
#    once validate is happy (the commands are printed at the end).
# PREFIX, ETC and STATE may be set to install elsewhere (test/install.test.js uses a throwaway
# root); NPM_FLAGS goes to `npm install`.
set -eu
tgz=${1:?usage: install-server.sh CRONVISOR-X.tgz}
prefix=${PREFIX:-/usr/local}
etc=${ETC:-/etc}
state=${STATE:-/var/lib/cronvisor}
case $state in
  */var/lib/?*) ;;
  *) echo "install-server.sh: STATE must be under /var/lib (the unit's StateDirectory=)" >&2; exit 2 ;;
esac
node=$(command -v node) || { echo "install-server.sh: node is not on PATH (Node.js 20)" >&2; exit 1; }

# shellcheck disable=SC2086 # NPM_FLAGS is a list of flags
npm install -g --prefix "$prefix" --no-audit --no-fund ${NPM_FLAGS:-} "$tgz"
bin=$prefix/bin/cronvisor
pkg=$prefix/lib/node_modules/cronvisor
[ -x "$bin" ] || { echo "install-server.sh: npm did not install $bin" >&2; exit 1; }

install -d -m 0755 "$etc/cronvisor" "$etc/systemd/system"
cfg=$etc/cronvisor/jobs.yaml
if [ -e "$cfg" ]; then
  echo "keeping $cfg"
else
  sed "s|^state_dir: .*|state_dir: $state|" "$pkg/examples/jobs.server.yaml" > "$cfg"
  chmod 0644 "$cfg"
  echo "wrote $cfg (state in $state)"
fi

# The unit runs this install's cronvisor on this config. systemd's PATH has /usr/local/bin and
# /usr/bin; a node elsewhere (nvm, a tarball) is put in front of them for the #! line.
unit=$etc/systemd/system/cronvisor.service
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
case ":$path:" in *":$(dirname "$node"):"*) env_path= ;; *) env_path="Environment=PATH=$(dirname "$node"):$path" ;; esac
sed -e "s|^ExecStart=.*|ExecStart=$bin daemon -c $cfg|" \
  -e "s|^StateDirectory=.*|StateDirectory=${state##*/var/lib/}|" \
  -e "s|^\(Environment=NODE_OPTIONS=.*\)|\1${env_path:+\\
$env_path}|" \
  "$pkg/examples/cronvisor.service" > "$unit"
chmod 0644 "$unit"
echo "wrote $unit"

"$bin" validate -c "$cfg"
cat <<NEXT

Installed. Edit $cfg, then:
  $bin validate -c $cfg
  systemctl daemon-reload && systemctl enable --now cronvisor
  $bin status -c $cfg
NEXT
