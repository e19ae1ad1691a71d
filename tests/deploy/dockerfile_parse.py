#!/usr/bin/python3
"""Reads deploy/Dockerfile into stages and prints what dockerfile_steps_test.sh asks for.

  dockerfile_parse.py FILE json                  every stage: name, base, instructions (joined lines)
  dockerfile_parse.py FILE run STAGE             the stage's RUN commands, NUL-separated
  dockerfile_parse.py FILE apt STAGE             packages named by `apt-get install` in the stage
  dockerfile_parse.py FILE copy-from STAGE       "FROMSTAGE<TAB>SRC<TAB>DEST" for each COPY --from
  dockerfile_parse.py FILE args STAGE            "NAME=DEFAULT" for each ARG of the stage
  dockerfile_parse.py FILE workdir STAGE         the stage's last WORKDIR
Only what this repository's Dockerfile uses is understood: no heredocs, no escape directive.
"""
import json
import re
import shlex
import sys


def instructions(text):
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if cur and line.lstrip().startswith("#"):
            continue  # comment lines inside a continuation are dropped, as docker does
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        word, _, rest = cur.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        cur = ""
    if cur:
        raise SystemExit("Dockerfile ends inside a line continuation")
    return out


def stages(text):
    result = []
    for word, rest in instructions(text):
        if word == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            if not m:
                raise SystemExit(f"cannot read FROM {rest}")
            result.append({"name": m.group(2) or str(len(result)), "base": m.group(1), "ins": []})
        elif result:
            result[-1]["ins"].append([word, rest])
    return result


def stage(all_stages, name):
    for s in all_stages:
        if s["name"] == name:
            return s
    raise SystemExit(f"no stage named {name}")


def apt_packages(cmd):
    pkgs = []
    for part in re.split(r"&&|;|\|\|", cmd):
        words = shlex.split(part)
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value prefixes
        if len(words) >= 2 and words[0] in ("apt-get", "apt") and "install" in words:
            after = words[words.index("install") + 1:]
            pkgs += [w for w in after if not w.startswith("-")]
    return pkgs


def main():
    path, what = sys.argv[1], sys.argv[2]
    all_stages = stages(open(path, encoding="utf-8").read())
    if what == "json":
        print(json.dumps(all_stages, indent=1))
        return
    s = stage(all_stages, sys.argv[3])
    if what == "run":
        sys.stdout.write("".join(rest + "\0" for word, rest in s["ins"] if word == "RUN"))
    elif what == "apt":
        for word, rest in s["ins"]:
            if word == "RUN":
                for p in apt_packages(rest):
                    print(p)
    elif what == "copy-from":
        for word, rest in s["ins"]:
            if word == "COPY" and "--from=" in rest:
                words = shlex.split(rest)
                src_stage = [w.split("=", 1)[1] for w in words if w.startswith("--from=")][0]
                paths = [w for w in words if not w.startswith("--")]
                for src in paths[:-1]:
                    print(f"{src_stage}\t{src}\t{paths[-1]}")
    elif what == "args":
        for word, rest in s["ins"]:
            if word == "ARG":
                name, _, default = rest.partition("=")
                print(f"{name}={default}")
    elif what == "workdir":
        wd = [rest for word, rest in s["ins"] if word == "WORKDIR"]
        print(wd[-1] if wd else "/")
    else:
        raise SystemExit(f"unknown request {what}")


if __name__ == "__main__":
    main()
