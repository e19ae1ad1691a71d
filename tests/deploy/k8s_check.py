#!/usr/bin/python3
"""Structural checks of deploy/kubernetes/*.yaml; see kubernetes_test.sh.

  k8s_check.py DIR OUTDIR
Parses every manifest (YAML syntax), checks the worker Deployment's predrop sidecar against its
ConfigMap and Secret, and writes the mounted files into OUTDIR as the pod would see them
(OUTDIR/<mountPath>/<key>). Prints "CONFIG <path>" (the config file to run check-config on) and
"SECRET_VALUE <value>" lines (passwords check-config must not print). Exits 1 on any failure.
"""
import os
import re
import sys

import yaml

errors = []


def need(cond, msg):
    if not cond:
        errors.append(msg)
    return cond


def endpoint(value):
    m = re.match(r"^\[?([^\]]*)\]?:(\d+)$", str(value))
    return (m.group(1), int(m.group(2))) if m else (None, None)


def quantity_mib(q):
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    m = re.match(r"^(\d+)(Ki|Mi|Gi)$", str(q))
    return int(m.group(1)) * units[m.group(2)] if m else None


def main():
    src, out = sys.argv[1], sys.argv[2]
    docs = []
    for name in sorted(os.listdir(src)):
        if not name.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(src, name)
        try:
            with open(path, encoding="utf-8") as f:
                for doc in yaml.safe_load_all(f):
                    if doc is None:
                        continue
                    docs.append((name, doc))
        except yaml.YAMLError as e:
            errors.append(f"{name}: YAML syntax: {e}")
    for name, doc in docs:
        need(isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"),
             f"{name}: a manifest without apiVersion/kind")
    by_kind = {}
    for name, doc in docs:
        if isinstance(doc, dict):
            by_kind.setdefault(doc.get("kind"), []).append((name, doc))

    # kustomization lists every manifest, and only existing ones
    for name, k in by_kind.get("Kustomization", []):
        listed = set(k.get("resources", []))
        present = {n for n, d in docs if d.get("kind") != "Kustomization"}
        need(listed == present, f"{name}: resources {sorted(listed)} != manifests {sorted(present)}")

    workloads = by_kind.get("Deployment", []) + by_kind.get("Pod", [])
    if not need(len(workloads) == 1, "want exactly one Deployment (or Pod) for the worker"):
        return
    wname, w = workloads[0]
    pod = w["spec"]["template"]["spec"] if w["kind"] == "Deployment" else w["spec"]
    containers = {c["name"]: c for c in pod.get("containers", [])}
    containers.update({c["name"]: c for c in pod.get("initContainers", [])
                       if c.get("restartPolicy") == "Always"})
    if not need("predrop" in containers, f"{wname}: no container named predrop"):
        return
    p = containers["predrop"]
    workers = [c for n, c in containers.items() if n != "predrop"]
    need(workers, f"{wname}: no worker container next to the predrop sidecar")

    # volumes: ConfigMap and Secret exist in the manifests
    configmaps = {d["metadata"]["name"]: d for _, d in by_kind.get("ConfigMap", [])}
    secrets = {d["metadata"]["name"]: d for _, d in by_kind.get("Secret", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {}
    for m in p.get("volumeMounts", []):
        v = volumes.get(m["name"])
        if not need(v is not None, f"predrop mounts undefined volume {m['name']}"):
            continue
        if "configMap" in v:
            cm = configmaps.get(v["configMap"]["name"])
            if need(cm is not None, f"ConfigMap {v['configMap']['name']} is not among the manifests"):
                mounts[m["mountPath"]] = ("configMap", cm.get("data", {}), None)
        elif "secret" in v:
            sec = secrets.get(v["secret"]["secretName"])
            if need(sec is not None, f"Secret {v['secret']['secretName']} is not among the manifests"):
                data = dict(sec.get("stringData", {}))
                need(not sec.get("data"), "Secret: use stringData placeholders, not base64 data")
                mounts[m["mountPath"]] = ("secret", data, v["secret"].get("defaultMode", 0o644))
        need(m.get("readOnly") is True, f"mount {m['mountPath']} should be readOnly")
    need(any(k == "secret" for k, _, _ in mounts.values()), "the credentials Secret is not mounted into predrop")
    need(not any("CONNINFO" in e.get("name", "") and "value" in e for e in p.get("env", [])),
         "conninfo must not be inline in the pod spec's env")

    # --config points at a key of the mounted ConfigMap
    args = p.get("args", []) + p.get("command", [])
    cfg_path = args[args.index("--config") + 1] if "--config" in args else None
    if not need(cfg_path, "predrop args lack --config FILE"):
        return
    cfg_dir, cfg_key = os.path.dirname(cfg_path), os.path.basename(cfg_path)
    kind, data, _ = mounts.get(cfg_dir, (None, {}, None))
    if not need(kind == "configMap" and cfg_key in data,
                f"--config {cfg_path}: no mounted ConfigMap key {cfg_key} at {cfg_dir}"):
        return
    try:
        cfg = yaml.safe_load(data[cfg_key]) or {}
    except yaml.YAMLError as e:
        errors.append(f"ConfigMap {cfg_key}: YAML syntax: {e}")
        return

    # write every mounted file where the pod sees it, under OUT
    for mpath, (kind, data, _) in mounts.items():
        d = os.path.join(out, mpath.lstrip("/"))
        os.makedirs(d, exist_ok=True)
        for key, value in data.items():
            with open(os.path.join(d, key), "w", encoding="utf-8") as f:
                f.write(value)

    # conninfo files resolve into the mounted Secret
    for section in ("capture", "store"):
        sec = cfg.get(section) or {}
        need("conninfo" not in sec, f"config {section}.conninfo inline: use conninfo_file from the Secret")
        f = sec.get("conninfo_file")
        if not need(f, f"config {section}.conninfo_file missing"):
            continue
        need(not os.path.isabs(f), f"{section}.conninfo_file should be relative to the config file (got {f})")
        resolved = os.path.normpath(os.path.join(cfg_dir, f))
        mdir, key = os.path.dirname(resolved), os.path.basename(resolved)
        kind, data, mode = mounts.get(mdir, (None, {}, None))
        need(kind == "secret" and key in data,
             f"{section}.conninfo_file -> {resolved}: not a key of the mounted Secret")

    # secret files readable by the non-root sidecar
    sc_pod, sc = pod.get("securityContext", {}), p.get("securityContext", {})
    uid = sc.get("runAsUser", sc_pod.get("runAsUser"))
    gid = sc.get("runAsGroup", sc_pod.get("runAsGroup"))
    need(sc.get("runAsNonRoot", sc_pod.get("runAsNonRoot")) is True, "predrop must run with runAsNonRoot")
    need(uid not in (None, 0), "predrop needs a numeric non-root runAsUser")
    need(sc.get("allowPrivilegeEscalation") is False, "predrop: allowPrivilegeEscalation should be false")
    need(sc.get("readOnlyRootFilesystem") is True, "predrop: readOnlyRootFilesystem should be true")
    need("ALL" in sc.get("capabilities", {}).get("drop", []), "predrop: drop ALL capabilities")
    for mpath, (kind, _, mode) in mounts.items():
        if kind == "secret":
            fs_group = sc_pod.get("fsGroup")
            readable = (mode & 0o004) or ((mode & 0o040) and fs_group is not None and fs_group in (gid, uid))
            need(readable, f"Secret at {mpath} (mode {oct(mode)}) is not readable by uid {uid}: "
                           "give it group read and fsGroup")
            need(not (mode & 0o004), f"Secret at {mpath} is world-readable (mode {oct(mode)})")

    # ports: listen/admin of the config vs container ports, probes, worker env
    ports = {pp.get("name"): pp["containerPort"] for pp in p.get("ports", [])}
    lhost, lport = endpoint(cfg.get("listen", "127.0.0.1:6432"))
    ahost, aport = endpoint(cfg.get("admin", ""))
    need(lport == 6432, f"config listen port {lport}, want 6432")
    need(aport == 9187, f"config admin port {aport}, want 9187")
    need(ahost in ("0.0.0.0", "::"), f"config admin host {ahost}: the kubelet probes the pod IP, bind 0.0.0.0")
    need(9187 in ports.values(), "predrop container does not declare containerPort 9187")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        pr = p.get(probe, {}).get("httpGet")
        if not need(pr, f"predrop {probe} should be an httpGet"):
            continue
        port = pr.get("port")
        port = ports.get(port) if isinstance(port, str) else port
        need(pr.get("path") == path, f"{probe} path {pr.get('path')}, want {path}")
        need(port == aport, f"{probe} port {pr.get('port')} -> {port}, want the admin port {aport}")
    for wk in workers:
        env = {e["name"]: e.get("value") for e in wk.get("env", [])}
        need(env.get("PGHOST") in ("127.0.0.1", "localhost", "::1"),
             f"worker {wk['name']}: PGHOST {env.get('PGHOST')}, want 127.0.0.1 (the sidecar)")
        need(str(env.get("PGPORT")) == str(lport), f"worker {wk['name']}: PGPORT {env.get('PGPORT')}, want {lport}")
    need(lhost in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "::"), f"config listen host {lhost}")

    # shutdown: preStop sleep, then drain, all inside the grace period
    pre = p.get("lifecycle", {}).get("preStop", {})
    cmd = pre.get("exec", {}).get("command", [])
    sleep_s = None
    if "sleep" in pre:
        sleep_s = pre["sleep"].get("seconds")
    elif cmd and cmd[0].endswith("sleep") and len(cmd) == 2 and cmd[1].isdigit():
        sleep_s = int(cmd[1])
    need(sleep_s is not None and sleep_s > 0, f"predrop preStop should sleep N seconds, got {pre}")
    drain_s = (cfg.get("limits") or {}).get("drain_timeout_ms", 30000) / 1000
    grace = pod.get("terminationGracePeriodSeconds", 30)
    need(sleep_s is not None and grace > sleep_s + drain_s,
         f"terminationGracePeriodSeconds {grace} must exceed preStop sleep {sleep_s} + drain {drain_s}s")

    # resources (figures from the bench)
    res = p.get("resources", {})
    need(res.get("requests", {}).get("cpu") == "100m", "requests.cpu should be 100m")
    need(quantity_mib(res.get("requests", {}).get("memory")) == 64, "requests.memory should be 64Mi")
    need(quantity_mib(res.get("limits", {}).get("memory")) == 256, "limits.memory should be 256Mi")

    print("CONFIG " + os.path.join(out, cfg_path.lstrip("/")))
    for _, (kind, data, _) in mounts.items():
        if kind == "secret":
            for value in data.values():
                for m in re.finditer(r"password=(\S+)", value):
                    print("SECRET_VALUE " + m.group(1))


if __name__ == "__main__":
    main()
    for e in errors:
        print("FAIL: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)
