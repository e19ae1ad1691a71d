# Sourced by the scripts that download from Debian (build-pg-query.sh, debian-root.sh): the mirror
# apt already uses, so they reach what the machine's own installs reach.
#   debian_mirror   prints DEBIAN_MIRROR if set, else the first URI of apt's sources (deb822 or
#                   one-line format), else deb.debian.org; without a trailing slash.
debian_mirror() {
  local uri=${DEBIAN_MIRROR:-}
  [ -n "$uri" ] || uri=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | sed 's/^URIs: *//') || true
  [ -n "$uri" ] || uri=$(grep -hoE '^deb +(\[[^]]*\] +)?[^ ]+' /etc/apt/sources.list 2>/dev/null | awk '{print $NF}' | head -n1) || true
  uri=${uri:-http://deb.debian.org/debian}
  echo "${uri%/}"
}
