#!/usr/bin/env python3
"""Turn the raw outputs of bench/run.sh into the table and bench/results/latest.json.

usage: report.py OUT_DIR SCALE LATEST_JSON ELAPSED_S

Every row has a median, a spread (p10-p90 of the per-call samples), the
median of its baseline measured in the same run, and their ratio.
"""
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

out_dir, scale, latest, elapsed = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])


def load(name):
    p = os.path.join(out_dir, name + ".json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def pct(v, q):
    v = sorted(v)
    if not v:
        return None
    k = (len(v) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def dist(v, unit_div=1000.0):
    """median, p10, p90 in ms of a list of µs samples"""
    return {"median": pct(v, 0.5) / unit_div, "p10": pct(v, 0.1) / unit_div,
            "p90": pct(v, 0.9) / unit_div, "n": len(v)}


rows = []


def row(name, what, unit, d, base_what=None, base=None, ratio=None, target=None, ok=None, note=None):
    r = {"row": name, "measured": what, "unit": unit}
    if d is not None:
        r.update({k: (round(x, 4) if isinstance(x, float) else x) for k, x in d.items()})
    if base_what:
        r["baseline"] = base_what
        if base is not None:
            r["baseline_median"] = round(base["median"], 4)
            r["baseline_p10"] = round(base["p10"], 4)
            r["baseline_p90"] = round(base["p90"], 4)
    if ratio is not None:
        r["ratio"] = round(ratio, 3)
    if target:
        r["target"] = target
    if ok is not None:
        r["meets_target"] = bool(ok)
    if note:
        r["note"] = note
    rows.append(r)


def paired_ratio(a, b):
    """median of the per-pair ratios a[i]/b[i] (interleaved A B A B ...)"""
    n = min(len(a), len(b))
    return statistics.median(a[i] / b[i] for i in range(n)) if n else None


# 1. exec in a live session
d = load("exec_live")
if d:
    s, b = d["samples"]["sbx"], d["samples"]["base"]
    r = paired_ratio(s, b)
    row("exec in a live session", "exec_command `true` with workspace_session_id, MCP round trip", "ms",
        dist(s), "fork+exec+wait /bin/true from the same client", dist(b), r, "<= 2.0x", r <= 2.0)

# 2. exec in an automatic session
d = load("exec_auto")
bw = None
if d:
    s, b = d["samples"]["sbx"], d["samples"]["base"]
    bw = dist(b)
    r = paired_ratio(s, b)
    row("exec in an automatic session", "exec_command `true`, no session (create, run, publish nothing, destroy)",
        "ms", dist(s), "bwrap --unshare-all --die-with-parent --ro-bind / / true, from the same client",
        bw, r, "<= 0.6x", r <= 0.6)

# 3. churn
d = load("churn")
if d:
    rate = d["n"] / d["loop_s"]
    s = d["samples"]["sbx"]
    dd = {"median": rate, "p10": 1000.0 / pct(s, 0.9) * 1000, "p90": 1000.0 / pct(s, 0.1) * 1000, "n": d["n"]}
    base = {"median": 1000.0 / bw["median"], "p10": 1000.0 / bw["p90"], "p90": 1000.0 / bw["p10"]} if bw else None
    row("session churn, serial", "automatic sessions (exec_command `true`) per second, 1 client", "1/s", dd,
        "bwrap runs per second (1/median)" if base else None, base,
        rate / base["median"] if base else None, ">= 300/s", rate >= 300,
        "spread: 1/p90 .. 1/p10 of the per-call latency")
    m = load("minsess")
    if m:
        mrate = m["n"] / m["loop_s"]
        ms = m["samples"]["session"]
        row("session churn, physical limit", "bench/minsess: the same isolation in-process, `true`, back to back "
            "(no MCP, worker, transcript or publication)", "1/s",
            {"median": mrate, "p10": 1e6 / pct(ms, 0.9), "p90": 1e6 / pct(ms, 0.1), "n": m["n"]},
            "sbx serial rate", {"median": rate, "p10": rate, "p90": rate}, rate / mrate, None, None,
            "context; ratio = sbx / physical limit")
    a, b2 = load("churn2a"), load("churn2b")
    if a and b2:
        span = max(a["t1"], b2["t1"]) - min(a["t0"], b2["t0"])
        rate2 = (a["n"] + b2["n"]) / span
        s2 = a["samples"]["sbx"] + b2["samples"]["sbx"]
        dd = {"median": rate2, "p10": 2000.0 / pct(s2, 0.9) * 1000, "p90": 2000.0 / pct(s2, 0.1) * 1000,
              "n": a["n"] + b2["n"]}
        row("session churn, 2 clients", "automatic sessions per second, 2 clients at once", "1/s", dd,
            "serial rate", {"median": rate, "p10": rate, "p90": rate}, rate2 / rate, "reported", None,
            "ratio = speed-up over serial on 2 cores")

# 4. transcript throughput
def transcript_row(d, name, producer, target):
    by = d["vars"]["bytes"]
    s, b = d["samples"]["sbx"], d["samples"]["base"]
    mbs = [by / (x / 1e6) / 1e6 for x in s]
    mbb = [by / (x / 1e6) / 1e6 for x in b]
    dd = {"median": statistics.median(mbs), "p10": min(mbs), "p90": max(mbs), "n": len(mbs), "bytes": by}
    bd = {"median": statistics.median(mbb), "p10": min(mbb), "p90": max(mbb)}
    row(name, "exec_command `%s` writing %d MiB of 100-byte lines, until it returns done" % (producer, by >> 20),
        "MB/s", dd, "the same producer piped through cat into a file on the host", bd,
        dd["median"] / bd["median"], ">= 400 MB/s" if target else None,
        dd["median"] >= 400 if target else None, "spread: min..max of the runs")

d = load("transcript")
if d:
    transcript_row(d, "transcript throughput", "perl lines.pl", True)
d = load("transcript_yes")
if d:
    transcript_row(d, "transcript, yes | head (context)", "yes LINE | head -c", False)

# 5. paging
d = load("paging")
if d:
    s, b = d["samples"]["sbx"], d["samples"]["base"]
    r = paired_ratio(s, b)
    row("paging", "read_command_lines 1000 lines at offset 0.9N of an N-line transcript (seq -w)", "ms", dist(s),
        "same at offset 0", dist(b), r, "<= 1.2x", r <= 1.2)
    if "seq_far" in d["samples"]:
        s, b = d["samples"]["seq_far"], d["samples"]["seq_0"]
        row("paging (plain seq)", "same with `seq`: the far window holds 2x the bytes", "ms", dist(s),
            "same at offset 0", dist(b), paired_ratio(s, b), None, None, "context")

# 5b. the artifacts set (issue 19)
for name, what, target in (("artifacts_digest", "digest of a %d MB go test -v log (broker/digest.c, in-process)", True),
                           ("artifacts_digest_generic", "digest of %d MB no parser knows (all try, generic reads it all)", False)):
    d = load(name)
    if d:
        s = d["samples"]["sbx"]
        dd = dist(s)
        row("digest" if target else "digest, generic (context)", what % (d["vars"]["bytes"] // 1000000), "ms", dd,
            None, None, None, "<= 500 ms" if target else None, dd["median"] <= 500 if target else None,
            "%d failures found" % d["vars"]["failures"])
def query_rows(suffix, what, of, per):
    """the rare-term row and the cursor-page row of runtime_query_output over one kind of transcript"""
    d = load("artifacts_query" + suffix)
    if d:
        by = d["vars"]["bytes"]
        mbs = [by / (x / 1e6) / 1e6 for x in d["samples"]["sbx"]]
        dd = {"median": statistics.median(mbs), "p10": min(mbs), "p90": max(mbs), "n": len(mbs), "bytes": by}
        row("query, rare term" + what, "runtime_query_output for a term on the last line of a %d MiB %s" % (by >> 20, of),
            "MB/s", dd, None, None, None, ">= 500 MB/s", dd["median"] >= 500, per + "; spread: min..max")
    d = load("artifacts_page" + suffix)
    if d:
        s, b = d["samples"]["sbx"], d["samples"]["base"]
        r = paired_ratio(s, b)
        row("query, cursor page" + what, "runtime_query_output's next page from a cursor at 0.9N of an N-line " + of,
            "ms", dist(s), "the page from a cursor at 0", dist(b), r, "<= 1.2x", r <= 1.2)


d = load("artifacts_zscan")
if d:
    by = d["vars"]["bytes"]
    mb = lambda v: [by / (x / 1e6) / 1e6 for x in v]
    s, b = mb(d["samples"]["sbx"]), mb(d["samples"]["base"])
    md = lambda v: {"median": statistics.median(v), "p10": min(v), "p90": max(v), "n": len(v)}
    row("query scan, persisted (in-process)", "decompress and search %d MiB in zstd frames, one core's CPU time "
        "(bench/zscanbench.c)" % (by >> 20), "MB/s", md(s), "the plain file's scan (pread)", md(b),
        statistics.median(s) / statistics.median(b), None, None, "context: CPU time, so load does not hide it")

query_rows("", "", "transcript", "MB scanned per second")
query_rows("_persisted", ", persisted artifact", "persisted artifact (zstd frames: each decompressed once)",
           "MB of uncompressed text scanned per second")

# 6. publish
d = load("publish")
imp = load("publish_import") or {}
if d:
    S = d["samples"]
    nf = imp.get("files", 50000)
    r = paired_ratio(S["exec_big"], S["exec_small"])
    row("publish (exec)", "exec_command `echo x >> f` incl. publication, %d-file workspace" % nf, "ms",
        dist(S["exec_big"]), "same in a 100-file workspace", dist(S["exec_small"]), r, "<= 1.5x", r <= 1.5)
    r = paired_ratio(S["write_big"], S["write_small"])
    db = dist(S["write_big"])
    row("publish (file_write)", "file_write of f without session (publishes a layer), %d-file workspace" % nf,
        "ms", db, "same in a 100-file workspace", dist(S["write_small"]), r, "<= 1.5x and <= 5 ms",
        r <= 1.5 and db["median"] <= 5.0)
    if imp.get("import_big_s") is not None:
        row("sandbox import", "sbxctl sandbox create of the %d-file tree" % nf, "s",
            {"median": imp["import_big_s"], "n": 1}, note="context")

# 6b. publish of many small files: one layer, one syncfs (issue 15)
d = load("publish_many")
if d:
    S = d["samples"]
    nf = (load("publish_many_files") or {}).get("files", 20000)
    row("publish (many files)", "exec_command writing %d small files in /workspace, incl. their publication" % nf,
        "ms", dist(S["exec_many"]), "same files in /tmp (nothing published)", dist(S["exec_many_tmp"]),
        paired_ratio(S["exec_many"], S["exec_many_tmp"]), None, None, "context")

# 7. file ops
d, f = load("fileops"), load("fileops_fs")
de, fe = load("fileops_edit"), load("fileops_fs_edit")
if d and f and de and fe:
    S, F = dict(d["samples"]), dict(f["samples"])
    for k in ("edit", "read_after_edit"):
        S[k], F[k] = de["samples"][k], fe["samples"][k]
    for tag, what, fwhat in (("read", "file_read 2000 lines at line 131072 of a 10 MB file",
                              "server-filesystem read_text_file head=2000 of the same file (its cheapest window)"),
                             ("edit", "file_edit of one line of a 1 MB file (publishes a layer)",
                              "server-filesystem edit_file of one line of the same file")):
        s, b = dist(S[tag]), dist(F[tag])
        sp = b["median"] / s["median"]
        row("file ops: " + tag, what, "ms", s, fwhat, b, sp, ">= 5x faster", sp >= 5,
            "ratio = server-filesystem / sbx")
    s = dist(S["read_head"])
    row("file ops: read (head)", "file_read lines 1-2000 of the 10 MB file", "ms", s,
        "server-filesystem read_text_file head=2000", dist(F["read"]),
        dist(F["read"])["median"] / s["median"], None, None, "context; ratio = server-filesystem / sbx")
    s, b = dist(S["read_after_edit"]), dist(F["read_after_edit"])
    row("file ops: read right after an edit", "the file_read above right after each file_edit (the snapshot "
        "view is remounted after a publication)", "ms", s, "server-filesystem, the same", b,
        b["median"] / s["median"], None, None, "context; ratio = server-filesystem / sbx")
    if "read@parsed" in S and "read@parsed" in F:
        s, b = dist(S["read@parsed"]), dist(F["read@parsed"])
        row("file ops: read, client parse included", "file_read as above, until the driver has parsed the reply",
            "ms", s, "server-filesystem, the same", b, b["median"] / s["median"], None, None,
            "context: jansson in the driver parses either ~166 KB reply in about 1.7 ms")

# 8. layers
d, fill = load("layers"), load("layers_fill")
if d:
    nl = fill["n"] if fill else None
    S = dict(d["samples"])
    S.update((load("layers_exec") or {}).get("samples", {}))
    for tag, what in (("read", "file_read README.md"), ("exec", "exec_command `true`, automatic session")):
        if tag + "_n" not in S:
            continue
        r = paired_ratio(S[tag + "_n"], S[tag + "_1"])
        row("layers: " + tag, "%s after %s single-file publications" % (what, nl), "ms", dist(S[tag + "_n"]),
            "same after 1 publication", dist(S[tag + "_1"]), r, "<= 1.5x", r <= 1.5)
    if fill:
        p = dist(fill["samples"]["publish"])
        row("layers: publication rate", "file_write publications into one sandbox, per call", "ms", p,
            note="context; %.0f publications/s over %d" % (fill["n"] / fill["loop_s"], fill["n"]))

# 9. memory
m = load("memory_rss")
if m:
    n = m["sessions"]
    pss = (m["pss_kb_after"] - m["pss_kb_before"]) / 1024.0 / n
    rss = (m["rss_kb_after"] - m["rss_kb_before"]) / 1024.0 / n
    row("memory per idle live session", "Pss of sbxd + sbx-workers / sessions, %d sessions (%d workers)" %
        (n, m["workers_after"] - m["workers_before"]), "MiB", {"median": pss, "n": n, "rss_mib": round(rss, 3)},
        target="<= 2 MiB", ok=pss <= 2.0, note="Rss %.3f MiB per session" % rss)

# 10. the lifecycle set
d = load("lifecycle_create")
if d:
    s = d["samples"]
    row("create_sandbox from a warm pool", "create_sandbox (template with warm = 4), MCP round trip", "ms",
        dist(s["warm"]), target="<= 20 ms", ok=dist(s["warm"])["median"] <= 20)
    row("create_sandbox cold", "create_sandbox (template with warm = 0): sandbox, empty workspace, session", "ms",
        dist(s["cold"]), target="<= 100 ms", ok=dist(s["cold"])["median"] <= 100)
    row("delete_sandbox", "delete_sandbox of a running claim", "ms", dist(s["delete"]), target="reported")
d = load("lifecycle_exec")
if d:
    s, b = d["samples"]["sbx"], d["samples"]["base"]
    r = paired_ratio(s, b)
    row("execute_command in a claim", "execute_command `true`, MCP round trip", "ms", dist(s),
        "fork+exec+wait /bin/true from the same client", dist(b), r, "<= 1.5x", r <= 1.5)
d = load("lifecycle_files")
if d:
    mb = 64.0 * 1048576 / 1e6
    for tag, what in (("upload", "upload_file"), ("download", "download_file")):
        rates = [mb / (x / 1e6) for x in d["samples"][tag]]
        dd = {"median": pct(rates, 0.5), "p10": pct(rates, 0.1), "p90": pct(rates, 0.9), "n": len(rates)}
        row(what + " 64 MiB", what + " of 64 MiB binary (base64 in the JSON line), MCP round trip", "MB/s", dd,
            target=">= 200 MB/s", ok=dd["median"] >= 200, note="rate of the decoded bytes")

# 11. peers
t = load("peer_true")
tm = None
if t and "results" in t:
    tm = statistics.median(t["results"][0]["times"])
for name, what in (("true", "/bin/true"), ("bwrap", "bwrap --unshare-all --die-with-parent --ro-bind / / true"),
                   ("crun", "crun run (busybox bundle)"), ("runc", "runc run (busybox bundle)"),
                   ("firejail", "firejail --quiet --noprofile true"), ("nsjail", "nsjail -Mo --chroot / true")):
    p = load("peer_" + name)
    if p is None:
        continue
    if "results" not in p:
        row("peer: " + name, what, "ms", None, note="refused: %s" % " ".join(p.get("refused") or ["failed"]))
        continue
    ts = [x * 1e6 for x in p["results"][0]["times"]]
    dd = dist(ts)
    row("peer: " + name, what + " (hyperfine -N, whole process)", "ms", dd, "/bin/true (hyperfine)",
        {"median": tm * 1e3, "p10": tm * 1e3, "p90": tm * 1e3} if tm else None,
        dd["median"] / (tm * 1e3) if tm else None, "reported")
d = load("exec_live")
if d:
    row("peer: fork+exec+wait", "fork+exec+wait /bin/true from the C driver", "ms", dist(d["samples"]["base"]),
        note="context")

# 12. neighbour
a, c = load("neighbour_alone"), load("neighbour")
if a and c:
    sa, sc_ = a["samples"]["alone"], c["samples"]["contended"]
    r = statistics.median(sc_) / statistics.median(sa)
    row("neighbour's CPU job", "a CPU job (perl, one core) in one sandbox while %d spinning commands run in another"
        % c["vars"]["spinners"], "s", dist(sc_, 1e6), "the same job alone", dist(sa, 1e6), r, "<= 2.0x on 2 cores",
        r <= 2.0, "ratio = slowdown of the neighbour")

# 13. stall: exec_command echo in another sandbox during each attack
def probes_during(name, windows):
    """The probes (of the drives NAME_probe_K) that overlapped one of the attack's windows."""
    inside, k = [], 1
    while True:
        probe = load("%s_probe_%d" % (name, k))
        if probe is None:
            return inside
        t = probe["t0"]
        for us in probe["samples"]["probe"]:
            if any(t <= b and t + us / 1e6 >= a for a, b in windows):
                inside.append(us)
            t += us / 1e6 + 0.05
        k += 1


SIZES = load("stall_sizes") or {}
for name, what in (("stall_pub", "publishing %s small files"), ("stall_pub50", "publishing %s small files"), ("stall_ren", "%s published files deleted, as many created"),
                   ("stall_shuf", "a %s MiB file with shuffled lines: diff_workspace_session, then its publication"),
                   ("stall_read", "40 parallel file_read limit=1 of a %s MiB file in a live session")):
    a = load(name)
    if not a:
        continue
    windows = [(a["t0"], a["t1"])]
    if name == "stall_read":
        for k in range(2, 41):
            r = load("stall_readers_%d" % k)
            if r:
                windows.append((r["t0"], r["t1"]))
    inside = probes_during(name, windows)
    attack_s = max(b for _, b in windows) - min(x for x, _ in windows)
    size = {"stall_pub": "NPUB", "stall_pub50": "NPUB50", "stall_ren": "NREN", "stall_shuf": "SHUF_MB", "stall_read": "BIG_MB"}[name]
    d = dist(inside) if inside else None
    if d:
        d["max"] = max(inside) / 1000.0
    ok = d is not None and d["max"] <= 100.0
    row("stall: " + name[6:], "exec_command echo in another sandbox while " + what % (SIZES.get(size, "?"),),
        "ms", d, target="max <= 100 ms", ok=ok,
        note="%d probes overlapped the %.1f s attack" % (len(inside), attack_s))
# 14. images (issue 17)
d = load("images")
if d:
    s, b = d["samples"]["image"], d["samples"]["default"]
    r = paired_ratio(s, b)
    row("session on a built image", "exec_command `true`, automatic session of a sandbox on the python image",
        "ms", dist(s), "the same on the default image (host /usr), interleaved", dist(b), r, "<= 1.1x", r <= 1.1)
bl = load("images_list") or []
for img in ("python", "anaconda"):
    bd = load("images_build_" + img)
    if not bd:
        continue
    info = next((i for i in bl if i.get("name") == img), {})
    row("lazy build of " + img, "first session of a sandbox on the %s image until built (mmdebstrap, "
        ".deb cache as left by make check / check-images)" % img, "s", {"median": bd["build_ms"] / 1000.0, "n": 1},
        note="size %s bytes, %s" % (info.get("size_bytes"), info.get("versions")))

# 15. egress (issue 18): MiB/s of a download through sbx-egress
d = load("egress")
if d:
    mib = d.get("vars", {}).get("mib", 100)
    p_, b_ = d["samples"]["proxy"], d["samples"]["direct"]
    dp = dist([mib * 1e6 / x for x in p_], 1.0)
    db = dist([mib * 1e6 / x for x in b_], 1.0)
    row("egress proxy throughput", "a %d MiB download from a local HTTP server with curl in a sandbox of policy open, "
        "through sbx-egress (exec_command round trip included)" % mib, "MiB/s", dp,
        "the same curl on the host without the proxy, interleaved", db, dp["median"] / db["median"],
        ">= 300 MiB/s", dp["median"] >= 300)
# 16. script (issue 18): a fresh sandbox, session and /out per call
d = load("script")
if d:
    s, b = d["samples"]["script"], d["samples"]["auto"]
    r = paired_ratio(s, b)
    row("sandbox_script", "sandbox_script `true`, egress none, on the built python image (a spare sandbox and "
        "session per call, /out; 100 ms pause after each call)", "ms", dist(s), "exec_command `true` in an automatic session, interleaved",
        dist(b), r, "<= 2.0x", r <= 2.0)

# boxes (issue 21 part B): a start from a version mounts its layers under the box's /work
d = load("boxes_version")
if d:
    v, p, big = d["samples"]["version"], d["samples"]["spare"], d["samples"].get("large")
    r = paired_ratio(v, p)
    row("box_start_version", "sandbox_start from a version (a spare box, /work over the version's layer: "
        "100 files of 10 kB)", "ms", dist(v), "sandbox_start from a spare, interleaved", dist(p), r)
    if big:
        r = paired_ratio(big, p)
        row("box_start_version_10k", "sandbox_start from a version of 10,000 files of 10 kB (a spare box, /work "
            "over the version's layer)", "ms", dist(big), "sandbox_start from a spare, interleaved", dist(p), r)

# ---- print and write --------------------------------------------------------------


def fmt(x):
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    return "%.2f" % x


# sbx-gateway (issue 20)
d = load("gateway")
if d:
    http, stdio = d["exec_http"], d["exec_stdio"]
    ratio = statistics.median(http) / statistics.median(stdio)
    floor = None
    if d.get("ping_bare"):
        # the client-side floor: stdio's exec plus what the SDK client's HTTP adds to a ping
        # against a bare server (bench/mcp-floor-server.mjs), over stdio's exec
        extra = statistics.median(d["ping_bare"]) - statistics.median(d["ping_stdio"])
        floor = (statistics.median(stdio) + extra) / statistics.median(stdio)
    row("gateway_exec", "exec_command true in a live session over HTTP (sbx-gateway, SDK client)", "ms",
        dist(http), base_what="the same over stdio (sandbox-mcp, SDK client)", base=dist(stdio), ratio=ratio,
        target="<= 1.3x", ok=ratio <= 1.3,
        note=floor and "client-side floor %.2fx (stdio + the SDK client's HTTP cost of a ping to a bare server)" % floor)
    if d.get("ping_bare"):
        ping, bare = dist(d["ping_http"]), dist(d["ping_bare"])
        row("gateway_ping", "ping over HTTP (sbx-gateway, SDK client)", "ms", ping,
            base_what="a bare node HTTP server answering ping (the SDK client's floor)", base=bare,
            ratio=ping["median"] / bare["median"],
            note="over stdio (sandbox-mcp) %s ms, the SDK's own HTTP server %s ms; CPU per ping (ms), "
                 "client/server: gateway %s/%s, stdio %s/%s, SDK server %s/%s, bare %s/-" %
                 (fmt(statistics.median(d["ping_stdio"]) / 1000), fmt(statistics.median(d["ping_floor"]) / 1000),
                  *(fmt(d["ping_cpu_us"][w][k] / 1000) for k in ("http", "stdio", "floor")
                    for w in ("client", "server")), fmt(d["ping_cpu_us"]["client"]["bare"] / 1000)))
    rps = d["rps100"]["requests"] / d["rps100"]["seconds"]
    row("gateway_rps_100", "requests/s of 100 concurrent HTTP sessions (file_read)", "req/s", {"median": rps},
        note="%d requests in %.1f s" % (d["rps100"]["requests"], d["rps100"]["seconds"]))
    kib = d["idle"]["per_session_kib"]
    row("gateway_idle_session", "gateway memory (Pss) per idle HTTP session", "KiB", {"median": kib},
        target="<= 256 KiB", ok=kib <= 256,
        note="%d sessions: Pss %d -> %d kB" % (d["idle"]["sessions"], d["idle"]["pss_before_kib"],
                                             d["idle"]["pss_after_kib"]))

# boxes (issue 21): bench/boxes.mjs
d = load("boxes")
if d:
    spare, status = dist(d["start_spare"]), dist(d["status"])
    row("box_start_spare", "sandbox_start from a spare box at the client (SDK client, stdio)", "ms", spare,
        base_what="sandbox_status of that box just after (sbxd makes the next spare meanwhile)", base=status,
        ratio=spare["median"] / status["median"], target="<= 20 ms", ok=spare["median"] <= 20,
        note="the first start, cold: %.1f ms" % (d["start_cold"][0] / 1000.0))
    thaw = dist(d["thaw_sbxd"])
    row("box_thaw", "thaw of a frozen box in sbxd (cgroup freezer write, its log)", "ms", thaw,
        base_what="sandbox_exec true at the client: frozen (thaw included) vs never frozen",
        base=dist(d["exec_warm"]), ratio=statistics.median(d["thaw_client"]) / statistics.median(d["exec_warm"]),
        target="<= 10 ms", ok=thaw["median"] <= 10,
        note="sandbox_exec true on a frozen box: %.1f ms at the client" % (statistics.median(d["thaw_client"]) / 1000.0))
    f = d["frozen"]
    kib = f["bytes"] / 1024.0 / max(f["boxes"], 1)
    row("box_frozen_memory", "memory cgroup usage per frozen box (sandbox cgroup: its session, shell, sleep, tmpfs)",
        "KiB", {"median": kib}, note="%d frozen boxes: %.1f MiB in %d cgroups" % (f["boxes"], f["bytes"] / 1048576.0,
                                                                                   f["cgroups"]))

# the stop row (issue 15): SIGTERM to exit with a managed session not finalized
d = load("stop")
if d:
    row("stop_kept", "SIGTERM to exit of sbxd with a managed session of %d files (kept in place)" % d["files"], "s",
        {"median": d["stop_s"]}, target="<= 1 s", ok=d["stop_s"] <= 1.0,
        note="the next start, adopting it, to its socket: %.2f s" % d["start_s"])

hdr = ("row", "median", "p10-p90", "unit", "baseline med", "ratio", "target", "ok")
lines = []
for r in rows:
    spread = "%s-%s" % (fmt(r.get("p10")), fmt(r.get("p90"))) if r.get("p10") is not None else "-"
    ok = "-" if r.get("meets_target") is None else ("yes" if r["meets_target"] else "MISS")
    med = fmt(r.get("median")) if "median" in r else ("refused" if "refused" in r.get("note", "") else "-")
    lines.append((r["row"], med, spread, r["unit"], fmt(r.get("baseline_median")),
                  (fmt(r["ratio"]) + "x") if r.get("ratio") is not None else "-", r.get("target", "-"), ok))
w = [max(len(str(x[i])) for x in lines + [hdr]) for i in range(len(hdr))]
print()
print("  ".join(str(h).ljust(w[i]) for i, h in enumerate(hdr)))
print("  ".join("-" * w[i] for i in range(len(hdr))))
for l in lines:
    print("  ".join(str(c).ljust(w[i]) if i in (0, 3, 6) else str(c).rjust(w[i]) for i, c in enumerate(l)))
print()

try:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
except OSError:
    rev = ""
res = {
    "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "git_head": rev,
    "host": {"kernel": platform.release(), "cpus": os.cpu_count(), "hostname": socket.gethostname(),
             "loadavg_at_end": open("/proc/loadavg").read().split()[:3]},
    "scale": scale,
    "elapsed_s": elapsed,
    "rows": rows,
}
os.makedirs(os.path.dirname(latest), exist_ok=True)
with open(latest, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
print("wrote %s (%d rows, %d s)" % (latest, len(rows), elapsed))
