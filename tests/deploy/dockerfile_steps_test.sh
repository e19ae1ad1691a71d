#!/usr/bin/env bash
# Exercises deploy/Dockerfile. With a container engine (`docker info` succeeds) it builds the image
# and runs `predrop --version` in it. Without one (the usual case here) it checks the Dockerfile's
# steps on the host instead:
#   - the shape: a debian:12 build stage, a debian:12-slim runtime stage, non-root USER, EXPOSE 6432
#     and 9187, a HEALTHCHECK on the admin /healthz, ENTRYPOINT predrop serve;
#   - every apt package of both stages has an install candidate, and the build stage's are all in
#     scripts/install-deps.sh (so the host build and the image build use the same packages);
#   - the build stage's non-apt RUN lines run as written, from the source tree (WORKDIR) with
#     BUILD_DIR/OUT_DIR pointed at a scratch folder (as `--build-arg` would), and the binary runs;
#   - every shared library the binary needs comes from a runtime package (or the slim base);
#   - every `COPY --from=build` source exists in the build output.
# Env: PREDROP_SOURCE_DIR (default: this file's repo), PREDROP_DEPLOY_WORK (a scratch folder kept
# between runs so the build is incremental; default: a temp folder removed at exit),
# PREDROP_DEPLOY_BUILD_DIR (the build stage's BUILD_DIR; default: WORK/build).
set -euo pipefail

SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DOCKERFILE=$SRC/deploy/Dockerfile
PARSE=(/usr/bin/python3 "$SRC/tests/deploy/dockerfile_parse.py" "$DOCKERFILE")
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

[ -f "$DOCKERFILE" ] || { echo "FAIL: $DOCKERFILE missing" >&2; exit 1; }
version=$(sed -n 's/^project(predrop VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$version" ] || { echo "FAIL: cannot read the project version from CMakeLists.txt" >&2; exit 1; }

if docker info >/dev/null 2>&1; then
  tag=predrop:deploy-test-$$
  echo "container engine present: building the image"
  docker build -f "$DOCKERFILE" -t "$tag" "$SRC"
  out=$(docker run --rm --entrypoint /usr/local/bin/predrop "$tag" --version)
  docker image rm -f "$tag" >/dev/null || true
  [ "$out" = "predrop $version" ] || { echo "FAIL: image's predrop --version said '$out'" >&2; exit 1; }
  echo "ok: image builds and runs: $out"
  exit 0
fi
echo "no container engine (docker info fails): checking the Dockerfile's steps on the host"

# ---- shape ------------------------------------------------------------------------------------
stages_json=$("${PARSE[@]}" json)
shape_rc=0
shape_out=$(/usr/bin/python3 - "$stages_json" "$SRC" <<'PY'

import json, os, re, sys
stages = json.loads(sys.argv[1])
root = sys.argv[2]
errors = []
def need(cond, msg):
    if not cond:
        errors.append(msg)
need(len(stages) == 2, f"want 2 stages (build, runtime), got {[s['name'] for s in stages]}")
by = {s["name"]: s for s in stages}
need(by.get("build", {}).get("base") == "debian:12", "stage 'build' must be FROM debian:12")
rt = stages[-1]
need(rt["base"] == "debian:12-slim", "the last (runtime) stage must be FROM debian:12-slim")
ins = {}
for word, rest in rt["ins"]:
    ins.setdefault(word, []).append(rest)
user = (ins.get("USER") or ["root"])[-1].split(":")[0]
need(user not in ("root", "0"), f"runtime USER must not be root (got {user})")
exposed = " ".join(ins.get("EXPOSE", [])).split()
for port in ("6432", "9187"):
    need(port in exposed or port + "/tcp" in exposed, f"EXPOSE {port} missing")
hc = " ".join(ins.get("HEALTHCHECK", []))
need("/healthz" in hc and "9187" in hc, "HEALTHCHECK must request /healthz on the admin port 9187")
ep = (ins.get("ENTRYPOINT") or [""])[-1]
try:
    ep_words = json.loads(ep)
except ValueError:
    ep_words = None
need(isinstance(ep_words, list) and len(ep_words) >= 2 and ep_words[0].endswith("predrop")
     and ep_words[1] == "serve", f"ENTRYPOINT must be exec form [.../predrop, serve], got {ep}")
# The default config: CMD ["--config", PATH], PATH copied from the build context.
cmd = (ins.get("CMD") or ["[]"])[-1]
try:
    cmd_words = json.loads(cmd)
except ValueError:
    cmd_words = []
cfg = cmd_words[cmd_words.index("--config") + 1] if "--config" in cmd_words[:-1] else None
need(cfg, f"CMD must be [\"--config\", FILE] (the image's default config), got {cmd}")
copies = {}
for rest in ins.get("COPY", []):
    words = rest.split()
    if not any(w.startswith("--from=") for w in words):
        srcs = [w for w in words if not w.startswith("--")]
        for src in srcs[:-1]:
            copies[srcs[-1]] = src
            need(os.path.exists(os.path.join(root, src)), f"COPY {src}: not in the build context")
if cfg:
    need(cfg in copies, f"the default config {cfg} is not COPYed from the build context")
    if cfg in copies:
        print("DEFAULT_CONFIG " + os.path.join(root, copies[cfg]))
        text = open(os.path.join(root, copies[cfg])).read()
        for key, want in (("listen", "0.0.0.0:6432"), ("admin", "0.0.0.0:9187")):
            need(re.search(rf'^{key}:\s*"?{re.escape(want)}"?\s*$', text, re.M),
                 f"default config must set {key}: {want} (published ports, HEALTHCHECK, probes)")
need(not any(e.startswith("PREDROP_") or " PREDROP_" in e for e in ins.get("ENV", [])),
     "no PREDROP_* in ENV: it would outrank any mounted --config file")
for e in errors:
    print("  shape: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
) || shape_rc=$?
[ $shape_rc -eq 0 ] || fail "Dockerfile shape (see above)"
default_config=$(sed -n 's/^DEFAULT_CONFIG //p' <<<"$shape_out")
[ $failures -eq 0 ] && ok "stages, USER, EXPOSE, HEALTHCHECK, ENTRYPOINT/CMD, default config, COPY sources"

# COPY . . must not carry host build folders into the image (their CMakeCache.txt names host paths).
ignore=$SRC/deploy/Dockerfile.dockerignore
if [ ! -f "$ignore" ]; then
  fail "deploy/Dockerfile.dockerignore missing (host build folders would enter the build context)"
else
  for pat in .git build 'build-*'; do
    grep -qxF -- "$pat" "$ignore" || fail "deploy/Dockerfile.dockerignore does not exclude $pat"
  done
fi

# ---- packages ---------------------------------------------------------------------------------
mapfile -t build_pkgs < <("${PARSE[@]}" apt build)
mapfile -t runtime_pkgs < <("${PARSE[@]}" apt runtime)
# One apt-cache call for all of them: "NAME CANDIDATE" per package apt knows.
declare -A candidate=()
while read -r name cand; do candidate[$name]=$cand; done < <(
  apt-cache policy "${build_pkgs[@]}" "${runtime_pkgs[@]}" 2>/dev/null \
    | awk '/^[^ ].*:$/ {name = substr($0, 1, length($0) - 1)} /^ *Candidate:/ {print name, $2}')
has_candidate() { [ -n "${candidate[$1]:-}" ] && [ "${candidate[$1]}" != "(none)" ]; }
[ ${#build_pkgs[@]} -gt 0 ] || fail "no apt-get install in the build stage"
[ ${#runtime_pkgs[@]} -gt 0 ] || fail "no apt-get install in the runtime stage"
deps_list=" $(sed -n '/^PKGS=(/,/^)/p' "$SRC/scripts/install-deps.sh" | tr -d '()' | sed 's/PKGS=//' | tr -s ' \n' ' ') "
for p in "${build_pkgs[@]}"; do
  has_candidate "$p" || fail "build package '$p' has no apt candidate (apt-cache policy $p)"
  [[ $deps_list == *" $p "* ]] || fail "build package '$p' is not in scripts/install-deps.sh's PKGS"
done
for p in "${runtime_pkgs[@]}"; do
  has_candidate "$p" || fail "runtime package '$p' has no apt candidate (apt-cache policy $p)"
  [[ $p == *-dev ]] && fail "runtime stage installs a -dev package: $p"
done
ok "apt candidates: build ${build_pkgs[*]}; runtime ${runtime_pkgs[*]}"

# ---- the build stage's RUN lines on the host --------------------------------------------------
if [ -n "${PREDROP_DEPLOY_WORK:-}" ]; then
  WORK=$PREDROP_DEPLOY_WORK
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/predrop-dockerfile.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
fi
workdir=$("${PARSE[@]}" workdir build)
declare -A argmap=()
build_dir=${PREDROP_DEPLOY_BUILD_DIR:-$WORK/build}
build_env=(BUILD_DIR="$build_dir" OUT_DIR="$WORK/out" JOBS="${PREDROP_DEPLOY_JOBS:-2}")
while IFS='=' read -r name default; do
  case $name in
    BUILD_DIR) argmap[$default]=$build_dir ;;
    OUT_DIR) argmap[$default]=$WORK/out ;;
    JOBS) ;;
    *) build_env+=("$name=$default") ;;
  esac
done < <("${PARSE[@]}" args build)
[ -n "${argmap[*]}" ] && [ ${#argmap[@]} -eq 2 ] || fail "build stage must declare ARG BUILD_DIR and ARG OUT_DIR (the host check redirects them)"
rm -rf "$WORK/out"
# Share compiled objects with other build folders of this tree (cwd and folder names not hashed).
export CCACHE_NOHASHDIR=1 CCACHE_BASEDIR=$SRC
start=$(date +%s)
ran=0
while IFS= read -r -d '' cmd; do
  if [[ $cmd == *apt-get* ]]; then
    echo "skip (packages checked above): ${cmd:0:60}..."
    continue
  fi
  echo "RUN $cmd"
  if ! (cd "$SRC" && env "${build_env[@]}" bash -euo pipefail -c "$cmd") >"$WORK/run.log" 2>&1; then
    tail -n 40 "$WORK/run.log" >&2
    fail "build-stage RUN failed: $cmd"
  fi
  ran=$((ran + 1))
done < <("${PARSE[@]}" run build)
[ $ran -gt 0 ] || fail "the build stage has no RUN line besides apt-get"
echo "build-stage RUN lines took $(( $(date +%s) - start ))s"

bin=$WORK/out/predrop
if [ -x "$bin" ]; then
  out=$("$bin" --version 2>&1) || fail "$bin --version exited non-zero"
  [ "$out" = "predrop $version" ] && ok "built binary: $out" || fail "--version said '$out', want 'predrop $version'"
  # Every library the binary itself links (DT_NEEDED) must come from a runtime package, or from what
  # debian:12-slim already holds (the C/C++ runtime); their own dependencies come with apt.
  slim_base=" libc6 libgcc-s1 libstdc++6 zlib1g "
  runtime_set=" ${runtime_pkgs[*]} "
  before=$failures
  declare -A resolved=()
  while read -r lib _ path _; do resolved[$lib]=$path; done < <(ldd "$bin" | awk '/=>/')
  needed=$(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}')
  for lib in $needed; do
    # The dynamic loader itself (NEEDED once libpg_query's thread-local storage is linked in) is
    # libc6's, and ldd prints it without "=>".
    [[ $lib == ld-linux-* ]] && { echo "  $lib <- libc6"; continue; }
    path=${resolved[$lib]:-not}
    if [ "$path" = "not" ]; then fail "ldd: $lib not found"; continue; fi
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n1 | cut -d: -f1) || true
    [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n1 | cut -d: -f1) || true
    if [ -z "$pkg" ]; then fail "no Debian package ships $path ($lib)"; continue; fi
    [[ $slim_base == *" $pkg "* || $runtime_set == *" $pkg "* ]] \
      || fail "$lib comes from '$pkg', which the runtime stage does not install"
    echo "  $lib <- $pkg"
  done
  [ $failures -eq $before ] && ok "every NEEDED library is covered by a runtime package"
  if [ -n "$default_config" ]; then
    clean_env=(env)
    while IFS= read -r v; do clean_env+=(-u "$v"); done < <(env | sed -n 's/^\(PREDROP_[A-Z0-9_]*\)=.*/\1/p' || true)
    if cout=$("${clean_env[@]}" "$bin" check-config "$default_config" 2>&1); then
      ok "the image's default config passes check-config"
    else
      echo "$cout" >&2; fail "check-config rejects the image's default config $default_config"
    fi
  fi
else
  fail "the build stage produced no $bin"
fi

# ---- COPY --from=build sources exist ---------------------------------------------------------
while IFS=$'\t' read -r from src dest; do
  [ "$from" = build ] || { fail "COPY --from=$from: only the build stage is expected"; continue; }
  host=""
  for prefix in "${!argmap[@]}"; do
    [[ $src == "$prefix" || $src == "$prefix"/* ]] && host=${argmap[$prefix]}${src#"$prefix"}
  done
  if [ -z "$host" ] && [[ $src == "$workdir"/* ]]; then host=$SRC/${src#"$workdir"/}; fi
  [ -n "$host" ] || { fail "COPY --from=build $src: not under WORKDIR or an ARG path"; continue; }
  [ -e "$host" ] && ok "COPY --from=build $src (host: $host)" || fail "COPY --from=build $src: $host does not exist"
done < <("${PARSE[@]}" copy-from runtime)

if [ $failures -ne 0 ]; then
  echo "dockerfile_steps_test: $failures failure(s)" >&2
  exit 1
fi
echo "dockerfile_steps_test: all checks passed"
