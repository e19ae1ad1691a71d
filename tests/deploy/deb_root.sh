# Sourced by the tests that work in a throwaway copy of a cached Debian root (scripts/debian-root.sh).
#   root_copy CACHED DEST   cp -a the cached root to DEST (the cache stays as debootstrap left it)
#   in_root ROOT CMD...     CMD chrooted into ROOT with /proc and /dev bound in a mount namespace of
#                           its own: the mounts end with the namespace, so a killed test leaves none
#   exec_in_root ROOT CMD...  the same in place of the calling shell: `(exec_in_root R cmd) &` makes
#                           $! the command's own pid (unshare, sh, chroot and env all exec)
#   root_remove DIR         rm -rf DIR, refusing while anything is mounted under it
# The chroot shares the host's network: 127.0.0.1 inside is the host's loopback.

root_copy() {
  local cached=$1 dest=$2
  cp -a "$cached" "$dest"
  # The cached root's resolver file is the one debootstrap copied when it was built.
  cp -L /etc/resolv.conf "$dest/etc/resolv.conf"
}

in_root() { (exec_in_root "$@"); }

exec_in_root() {
  local root=$1; shift
  # Private propagation: the binds are not seen outside the namespace.
  exec unshare --mount --propagation private -- sh -c '
    root=$1; shift
    mount --rbind /proc "$root/proc" && mount --rbind /dev "$root/dev" || exit 125
    exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"' in_root "$root" "$@"
}

root_remove() {
  local dir=$1
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  if awk -v d="$(realpath "$dir")/" 'index($5 "/", d) == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
    echo "root_remove: something is mounted under $dir; not removing it" >&2
    return 1
  fi
  rm -rf --one-file-system "$dir"
}
