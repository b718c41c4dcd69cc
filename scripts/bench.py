#!/usr/bin/env python3
"""Crawl benchmark: crawls a synthetic web served by synthweb with one
dispatcher and N supervisors x M children, and prints where the time and the
CPU go. A short human summary goes to stderr, the JSON result to stdout.

    scripts/bench.sh                              # realistic profile, the issue's set-up
    scripts/bench.sh --hosts 60 --pages-per-host 100
    scripts/bench.sh --profile small              # the old benchmark: 50 x 400 pages of 4,000 bytes

Profiles (synthweb --profile, see tests/src/web/model.rs `Profile`):
- realistic (default): 200 hosts x 250 pages of 5-32 KiB (mean 18 KiB), 10-40
  links a page (80% same host), about 3% 404s and 1% redirects, robots.txt
  everywhere, 3 hosts with Crawl-delay: 0.5. Dispatcher flags: --min-delay-ms 0
  --max-domain-connections 8 --child-concurrency 32.
- small: 50 hosts x 400 pages of 4,000 bytes, 10 random links, a quarter 404s
  and a quarter redirects. Dispatcher flags: --min-delay-ms 0 only.

Figures (the JSON keys are in brackets):
- pages: responses the dispatcher counted (its summary's `fetched`);
  [pages_per_sec] = pages / wall time from the dispatcher's start to the exit
  of every crawler process.
- [no_delay]: the pages of the hosts WITHOUT a Crawl-delay (from the store:
  `pages` documents by `domain`, the Crawl-delay hosts listed by synthweb's
  --write-info), and their rate = that count / (last `fetched_at` among them
  - dispatcher start). The Crawl-delay hosts take ~0.5 s a page and would
  otherwise decide the wall time.
- [main_phase]: the per-second page rate comes from the `fetched_at` of the
  stored pages; the main phase runs from the first to the last second whose
  rate is at least half the peak second's. Its machine CPU use comes from
  /proc/stat, sampled every second (busy = everything but idle and iowait,
  over the samples that bracket the phase), in % of all cores and in cores.
- [cpu_ms_per_page]: CPU (user + system) per page for each role: dispatcher,
  supervisor, crawler-child (all processes of a role summed), the store
  server and synthweb, sampled from /proc/PID/stat every 0.2 s (a process's
  last <0.2 s before it exits is missed; [crawler_cpu_exact_secs] is the
  exact total of the crawler processes from wait4()).
- [web_server]: what synthweb served (requests/s, MB/s over the wall time and
  in its busiest second, from its --request-log and /proc/PID/io wchar) and
  its CPU share (% of one core, and % of all the CPU the machine used).
- [stored_bytes_per_page]: average BSON size of the `pages` documents, read
  raw by the client (nx-27017's `$bsonSize` counts binary base64'd);
  `body_bytes_per_page` is the average `$binarySize` of the zstd-compressed
  `body` field over the pages that have one.
- [peak_rss_mib]: the largest VmHWM of any process of each role.
- [store]: which store server ran (mongod or nx-27017).
- [tenths]: the hosts without Crawl-delay, their run (dispatcher start to
  their last `fetched_at`) cut into ten equal spans of time, pages/s in
  each, and [last_over_first] = the last tenth's rate over the first's: a
  crawl that slows down as its collections grow shows it here.
- [dispatcher_rss_mib]: the dispatcher's VmRSS every 5 s ([secs, MiB]).
- [store_work]: the store's work per stored page by collection and
  command (commands = round trips, and the documents they carried:
  inserted, update statements, or returned by reads), from the `store work`
  line each crawler process logs as it ends (the driver's command
  monitoring, shared/store/src/work.rs).
- [collections]: each crawl collection's documents, data and index bytes
  (collStats; what the store answers, else the error).
- --node-cpu-quota CORES: each supervisor (a "node": it and its children)
  runs in a cgroup of its own limited to CORES of CPU (cgroup v1
  cpu.cfs_quota_us, or v2 cpu.max), to measure how the rate grows with
  nodes of equal size on one machine: `--supervisors 1`, 2, 4.

Webs (--web):
- synthweb (default): the profile's web, served by synthweb.
- nginx: the same web (same URLs, bodies, links, statuses, robots.txt,
  redirects, 404s) written to files by `synthweb --dump` and served by
  Debian's nginx (installed if missing, as root; scripts/bench_nginx.py
  says which settings and why), started on a free loopback port with its
  config, pid file and logs in WORK/nginx/ and stopped on every exit.
  `--nginx-gzip on` compresses HTML as Debian's stock config does,
  `--nginx-gzip static` sends files compressed once when written;
  `--nginx-workers N` (default auto: one per core). [web_server] then
  also counts nginx's connections and requests per connection, from its
  access log.
- wide: the realistic profile's pages on many small slow sites (--hosts
  2,000 x --pages-per-host 25 by default), every answer but robots.txt
  after --response-delay-ms (300), crawled at the DEFAULT politeness (1 s
  per domain: none of the profile's --min-delay-ms 0 and
  --max-domain-connections 8), with enough fetch slots and credits per
  child for every domain it owns (--child-concurrency, --child-capacity).
  [politeness] gives the limit hosts / (gap + response time) and the
  rates against it.

Figures are indicative on a loaded machine: compare runs made under the same
load.
"""
import argparse, json, math, os, random, resource, secrets, shutil, signal, socket, subprocess, sys, tempfile, time

import bench_nginx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
TICK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
ROLES = ("dispatcher", "supervisor", "crawler-child")

PROFILES = {
    # Dispatcher flags of the profile (before --dispatcher-arg).
    "realistic": ["--min-delay-ms", "0", "--max-domain-connections", "8", "--child-concurrency", "32"],
    "small": ["--min-delay-ms", "0"],
}
# synthweb counts when not given: the realistic profile's own; the old bench's for small.
DEFAULT_COUNTS = {"realistic": (None, None), "small": (50, 400)}
WEBS = ("synthweb", "nginx", "wide")
# --web wide: many small sites (counts when not given), each answer paced.
WIDE_COUNTS = (2000, 25)
WIDE_RESPONSE_DELAY_MS = 300
# The dispatcher's default gap between two requests to a domain (--min-delay-ms).
DEFAULT_MIN_DELAY_MS = 1000
# Dispatcher flags that set politeness: --web wide leaves the profile's out.
POLITENESS_FLAGS = ("--min-delay-ms", "--max-domain-connections")


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port below the kernel's ephemeral range ([20000, low)), bindable now.

    A port the kernel hands out (bind to port 0) comes from the ephemeral
    range, from which every outgoing connection and port-0 server also takes
    ports: by the time the dispatcher binds it, someone else may hold it.
    The kernel never hands out ports below that range by itself (see
    tests/src/harness.rs `free_port`)."""
    low = ephemeral_low()
    start = 20000 if low > 20000 else 1024
    ports = list(range(start, low))
    random.shuffle(ports)
    for port in ports:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        return port
    raise SystemExit("bench.py: no free port below the ephemeral range")


def proc_sample(pid):
    """(comm, cpu seconds, peak rss KiB) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        hwm = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        return comm, cpu, hwm
    except (OSError, ValueError, IndexError):
        return None


def rss_kib(pid):
    """VmRSS of a live process in KiB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class NodeCgroup:
    """A cgroup limited to `cores` of CPU, for one bench "node" (a supervisor
    and the children it spawns, which inherit it)."""

    def __init__(self, name, cores):
        v2 = "/sys/fs/cgroup/cgroup.controllers"
        period = 100_000
        quota = max(1000, int(cores * period))
        if os.path.exists(v2):
            self.path = os.path.join("/sys/fs/cgroup", name)
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cpu.max"), "w") as f:
                f.write(f"{quota} {period}")
        else:
            self.path = os.path.join("/sys/fs/cgroup/cpu", name)
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cpu.cfs_period_us"), "w") as f:
                f.write(str(period))
            with open(os.path.join(self.path, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(quota))

    def enter(self):
        """Moves the calling process in (use as a Popen preexec_fn)."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def tenths(times, t0):
    """Pages/s in each tenth of [t0, last time] (times: seconds since the epoch)."""
    if not times:
        return None
    span = max(times) - t0
    if span <= 0:
        return None
    counts = [0] * 10
    for t in times:
        counts[min(9, int((t - t0) / span * 10))] += 1
    rates = [round(n / (span / 10), 1) for n in counts]
    return {"secs_each": round(span / 10, 2), "pages_per_sec": rates,
            "last_over_first": round(rates[-1] / rates[0], 2) if rates[0] else None}


def progress_tenths(log_path):
    """Pages/s in each tenth of the crawl from the dispatcher's monitor lines
    (pages counted every 5 s): from its start to the first line with the
    final count. For big crawls, whose per-page times are not read back."""
    points = []
    try:
        with open(log_path) as f:
            for line in f:
                if line.startswith("monitor {"):
                    m = json.loads(line[len("monitor "):])
                    points.append((m["elapsed_secs"], m["pages"]))
    except (OSError, ValueError, KeyError):
        return None
    if len(points) < 3:
        return None
    final = points[-1][1]
    end = next(t for t, n in points if n == final)
    if end <= 0:
        return None
    at = lambda x: next((n0 + (n1 - n0) * (x - t0) / (t1 - t0) for (t0, n0), (t1, n1) in zip([(0.0, 0)] + points, points)
                         if t0 <= x <= t1 and t1 > t0), final)
    bounds = [end * i / 10 for i in range(11)]
    rates = [round((at(b) - at(a)) / (end / 10), 1) for a, b in zip(bounds, bounds[1:])]
    return {"secs_each": round(end / 10, 2), "pages_per_sec": rates, "from": "dispatcher monitor lines (all hosts)",
            "last_over_first": round(rates[-1] / rates[0], 2) if rates[0] else None}


def wchar(pid):
    """Bytes the process has written (sockets included), or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def cpu_times():
    """(total, idle) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]), idle


def parents():
    """{pid: parent pid} of every process (scans /proc: no procps needed)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            found[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def children_of(pids):
    """Pids whose parent is in `pids`."""
    return [pid for pid, ppid in parents().items() if ppid in pids]


# Run with the store's Python (pymongo): prints a JSON object of store figures.
STORE_QUERY = r"""
import json, sys
import pymongo
uri, db_name = sys.argv[1], sys.argv[2]
db = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)[db_name]
# The default crawl's pages (collections are named after the crawl id).
pages = db["crawl__pages"]
out = {"documents": pages.estimated_document_count()}
# Big crawls: sizes from a sample, and no per-page times (reading a million
# pages back through nx-27017 did not finish).
BIG = 300_000
sample = {} if out["documents"] <= BIG else {"limit": 50_000}
# The documents' size as BSON on the wire: what mongod stores (before its
# block compression). nx-27017's $bsonSize counts binary fields base64'd
# (an 18 KB page's 4.8 KB body as 6.4 KB), so it is not used.
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
raw = db.get_collection(pages.name, codec_options=CodecOptions(document_class=RawBSONDocument))
sizes = [len(d.raw) for d in raw.find({}, **sample)]
out["bson_bytes"] = sum(sizes) * out["documents"] / max(len(sizes), 1)
# What each field of a page costs, as BSON elements (type, name, value),
# on average over the first pages: what a lean document would drop.
import bson
fields, n = {}, 0
for d in raw.find({}, limit=2000):
    n += 1
    for k, v in bson.decode(d.raw).items():
        fields[k] = fields.get(k, 0) + len(bson.encode({k: v})) - 5
out["field_bytes"] = {k: round(v / n, 1) for k, v in sorted(fields.items(), key=lambda kv: -kv[1])} if n else {}
try:
    out["by_status"] = {str(g["_id"]): g["n"] for g in pages.aggregate([{"$group": {"_id": "$status", "n": {"$sum": 1}}}])}
except Exception as e:
    out["by_status_error"] = str(e)[:200]
out["method"] = "client-side BSON size" + (f" of {len(sizes)} pages" if sample else "")
try:
    if sample:
        raise RuntimeError("not summed over a big collection")
    agg = list(pages.aggregate([{"$match": {"body": {"$exists": True}}},
        {"$group": {"_id": None, "n": {"$sum": 1}, "body": {"$sum": {"$binarySize": "$body"}},
                    "raw": {"$sum": "$bytes"}}}]))
    if agg:
        out["with_body"], out["body_bytes"], out["raw_bytes"] = agg[0]["n"], agg[0]["body"], agg[0]["raw"]
except Exception as e:
    out["body_error"] = str(e)
colls = {}
for kind in ("pages", "segments", "outcomes", "progress", "seeds", "body_dicts"):
    name = "crawl__" + kind
    try:
        c = db.command("collStats", name)
        colls[kind] = {k: c.get(k) for k in ("count", "size", "storageSize", "totalIndexSize", "avgObjSize")}
    except Exception as e:
        colls[kind] = {"count": db[name].estimated_document_count(), "error": str(e)[:200]}
out["collections"] = colls
times = []
for d in pages.find({}, {"domain": 1, "fetched_at": 1}) if not sample else []:
    at = d.get("fetched_at")
    if hasattr(at, "timestamp"):
        if at.tzinfo is None:
            import datetime
            at = at.replace(tzinfo=datetime.timezone.utc)
        times.append([d.get("domain", ""), at.timestamp()])
out["fetched"] = times
print(json.dumps(out))
"""


def ground_truth(info, st, dns=False):
    """The stored pages by status against synthweb's ground truth
    (--write-info): every URL stored once, with its status. Through the
    test DNS server (`dns`), the pages of the domains whose names fail
    cannot be stored, and are not expected."""
    stored = st.get("by_status")
    if stored is None:
        return None
    if dns:
        expected = info.get("expected_by_status_resolving") or {}
        pages = info.get("expected_pages_resolving")
    else:
        expected = info.get("expected_by_status") or {}
        pages = info.get("expected_pages")
    return {"expected_by_status": expected, "stored_by_status": stored,
            "matches": stored == expected and st.get("documents") == pages}


def store_python():
    venv = os.environ.get("CRAWLER_STORE_VENV", os.path.join(ROOT, ".venv-store"))
    for py in (os.path.join(venv, "bin", "python"), sys.executable):
        if os.path.exists(py) and subprocess.call([py, "-c", "import pymongo"], stderr=subprocess.DEVNULL) == 0:
            return py
    return None


def query_store(uri, db):
    py = store_python()
    if py is None:
        return {"error": "no Python with pymongo (.venv-store is made by scripts/store.sh install)"}
    r = subprocess.run([py, "-c", STORE_QUERY, uri, db], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:]}
    return json.loads(r.stdout)


def role_cpu(cpu_by_pid):
    """{role: CPU seconds so far} from {pid: (role, cpu seconds)}."""
    out = {}
    for role, cpu in cpu_by_pid.values():
        out[role] = out.get(role, 0.0) + cpu
    return out


def main_phase(times, t0, samples, web_role="synthweb"):
    """Per-second rates from `times` (seconds since the epoch), the main
    phase (first..last second at >= 50% of the peak second) and the
    machine's CPU use over it from the /proc/stat `samples`."""
    if not times:
        return None
    buckets = {}
    for t in times:
        s = int(t - t0)
        buckets[s] = buckets.get(s, 0) + 1
    peak = max(buckets.values())
    busy = [s for s, n in buckets.items() if n >= peak / 2]
    first, last = min(busy), max(busy)
    pages = sum(n for s, n in buckets.items() if first <= s <= last)
    secs = last - first + 1
    # /proc/stat samples bracketing [t0 + first, t0 + last + 1].
    lo = [x for x in samples if x[0] <= t0 + first]
    hi = [x for x in samples if x[0] >= t0 + last + 1]
    a = lo[-1] if lo else samples[0]
    b = hi[0] if hi else samples[-1]
    dt, di = b[1] - a[1], b[2] - a[2]
    busy_share = (1 - di / dt) if dt > 0 else 0.0
    span = max(b[0] - a[0], 1e-9)
    roles = {r: round((b[3].get(r, 0.0) - a[3].get(r, 0.0)) / span, 2) for r in ROLES + ("store", web_role)}
    web_share = None
    if dt > di:
        web_share = round((b[3].get(web_role, 0.0) - a[3].get(web_role, 0.0)) * TICK / (dt - di) * 100, 1)
    return {
        "definition": "first..last second whose page rate (stored fetched_at) >= 50% of the peak second",
        "start_secs": first,
        "end_secs": last + 1,
        "secs": secs,
        "pages": pages,
        "pages_per_sec": round(pages / secs, 1),
        "peak_pages_per_sec": peak,
        "machine_cpu_percent": round(busy_share * 100, 1),
        "machine_cpu_cores": round(busy_share * NCPU, 2),
        "cores_by_role": roles,
        "cores_of_bench_processes": round(sum(roles.values()), 2),
        "cpu_ms_per_page": {r: round(c * span * 1000 / pages, 3) for r, c in roles.items()},
        f"{web_role}_share_of_machine_cpu_percent": web_share,
        "cpu_sampled_secs": round(b[0] - a[0], 1),
    }


def request_records(path):
    """The records of synthweb's JSON-lines request log, one dict a request
    (a line that is not JSON, such as one being written, is skipped)."""
    with open(path) as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                continue


def read_request_log(path, t0, forbidden=frozenset()):
    """Requests, robots.txt requests, the busiest second, statuses, and
    requests to URLs robots.txt forbids (`forbidden`: host + path and
    query, as the log names them; synthweb's `must_not_fetch_requests`)."""
    if not os.path.exists(path):
        return None
    n, robots, per_sec, status, violations = 0, 0, {}, {}, 0
    for r in request_records(path):
        n += 1
        robots += r["path"] == "/robots.txt"
        violations += (r["host"] + r["path"]) in forbidden
        s = int(r["at_ms"] / 1000 - t0)
        per_sec[s] = per_sec.get(s, 0) + 1
        status[str(r["status"])] = status.get(str(r["status"]), 0) + 1
    return {"requests": n, "robots": robots, "peak_per_sec": max(per_sec.values(), default=0), "status": status,
            "robots_violations": violations if forbidden else None}


def start_store(work, keep):
    """Starts a store server in WORK/store (scripts/store.sh; a kept run
    keeps its data, to export or query afterwards with `scripts/store.sh
    start WORK/store --persist`): (uri, kind, store_dir)."""
    store_dir = os.path.join(work, "store")
    persist = ["--persist"] if keep else []
    uri = subprocess.check_output([os.path.join(ROOT, "scripts", "store.sh"), "start", store_dir] + persist,
                                  text=True).strip()
    kind = open(os.path.join(store_dir, "kind")).read().strip()
    return uri, kind, store_dir


def web_paths(work):
    return {k: os.path.join(work, f) for k, f in
            (("seeds", "seeds.txt"), ("hosts", "hosts"), ("info", "web.json"), ("request_log", "requests.jsonl"))}


def synthweb_cmd(args, paths, hosts, pages_per_host):
    """synthweb's command line for `args.profile` and the counts, writing
    the seeds, hosts and info files (and `args.web_arg` after)."""
    cmd = [os.path.join(BIN, "synthweb"), "--profile", args.profile, "--write-seeds", paths["seeds"],
           "--write-hosts", paths["hosts"], "--write-info", paths["info"]]
    if hosts is not None:
        cmd += ["--hosts", str(hosts)]
    if pages_per_host is not None:
        cmd += ["--pages-per-host", str(pages_per_host)]
    return cmd


def start_web(args, work, hosts, pages_per_host, extra=()):
    """Starts synthweb for `args.profile` (and `extra`, then `args.web_arg`)
    with its seeds, hosts, info and request log in WORK: (process, paths,
    info), the paths a dict with keys seeds, hosts, info, request_log."""
    paths = web_paths(work)
    cmd = synthweb_cmd(args, paths, hosts, pages_per_host) + ["--request-log", paths["request_log"]]
    web = subprocess.Popen(cmd + list(extra) + args.web_arg, stdout=subprocess.PIPE, text=True)
    print(web.stdout.readline().strip(), file=sys.stderr)
    return web, paths, json.load(open(paths["info"]))


def start_nginx(args, work, hosts, pages_per_host):
    """The profile's web written to WORK/web by `synthweb --dump` for a
    free port, served there by nginx (scripts/bench_nginx.py): (Nginx,
    paths, info), the paths as start_web's, the request log nginx's access log."""
    bench_nginx.ensure_installed()
    paths = web_paths(work)
    port = free_port()
    web_dir = os.path.join(work, "web")
    cmd = synthweb_cmd(args, paths, hosts, pages_per_host) + ["--bind", f"127.0.0.1:{port}", "--dump", web_dir]
    t = time.time()
    out = subprocess.run(cmd + args.web_arg, stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    if args.nginx_gzip == "static":
        bench_nginx.precompress(web_dir)
    dumped = time.time() - t
    # The files stay in the page cache (about 1 GB for the realistic web);
    # written back now, not during the crawl: the kernel would do it 30 s
    # after the dump (vm.dirty_expire_centisecs), competing with the crawl
    # for the CPU (ext4 allocates blocks at write-back) and the disk.
    os.sync()
    print(f"{out} ({dumped:.1f} s, then {time.time() - t - dumped:.1f} s to sync)", file=sys.stderr)
    nginx = bench_nginx.Nginx(work, web_dir, port, workers=args.nginx_workers, gzip=args.nginx_gzip).start()
    paths["request_log"] = nginx.access_log
    print(f"nginx listening on 127.0.0.1:{port} (config {nginx.conf})", file=sys.stderr)
    return nginx, paths, json.load(open(paths["info"]))


def synthweb_connections(web):
    """`synthweb served N requests on C connections`, its last line, read
    after it exited: C, or None."""
    try:
        rest = web.stdout.read() if web.stdout else ""
    except (OSError, ValueError):
        return None
    for line in rest.splitlines():
        words = line.split()
        if line.startswith("synthweb served ") and len(words) >= 6:
            try:
                return int(words[5])
            except ValueError:
                return None
    return None


def raise_fd_limit(need):
    """Raises this process's open-file limit (inherited by everything the
    bench starts) to `need`: past the hard limit too where that is allowed
    (root, up to the kernel's `fs.nr_open`), else to the hard limit; warns
    when the limit stays below `need`. A wide web's children each hold a
    connection for every domain they own, and the web a socket for each.
    Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                ceiling = int(f.read().split()[0])
            raised = min(need, ceiling)
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, raised))
            soft, hard = raised, raised
        except (OSError, ValueError):
            pass
    target = hard if hard != resource.RLIM_INFINITY else max(soft, need)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < need:
        print(f"bench.py: warning: open files limited to {target}, the web needs about {need} "
              f"(raise the hard limit: ulimit -Hn / limits.conf)", file=sys.stderr)
    return target


def check_ports(need):
    """Warns when the ephemeral port range is smaller than `need` (every
    connection to the web takes a port of it: one web address and port)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return
    if high - low + 1 < need:
        print(f"bench.py: warning: {high - low + 1} ephemeral ports ({low}-{high}) for about {need} "
              f"connections (sysctl net.ipv4.ip_local_port_range)", file=sys.stderr)


def flag_value(flags, name):
    """The value of `name` in a flag list (`--x v` or `--x=v`), the last one wins."""
    value = None
    for i, f in enumerate(flags):
        if f == name and i + 1 < len(flags):
            value = flags[i + 1]
        elif f.startswith(name + "="):
            value = f.split("=", 1)[1]
    return value


def without_flags(flags, names):
    """`flags` without `names` and their values."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
            continue
        if f in names:
            skip = True
            continue
        if any(f.startswith(n + "=") for n in names):
            continue
        out.append(f)
    return out


# Credits a child at most on the wide web. Past what the store takes in a
# few seconds, more credits only queue fetched pages in the children: at
# 100,000 domains over HTTPS on this machine, 3,976 a child gave a page
# 18.5 s of store_wait and 26 s between two requests to a domain (so its
# connection was gone); 512 gave 1.3 s, 9 s, and 45 % more pages/s. 2,048
# in all stay above what politeness needs at that rate (a credit carries a
# page every gap + answer, 1.3 s: 1,575 pages/s).
WIDE_MAX_CREDITS = 512


def wide_capacity(hosts, supervisors, children, files):
    """(--child-concurrency, --child-capacity) for the wide web: a fetch
    slot for every domain a child owns (a domain fetches one URL at a time,
    so slots never hold it back) and two credits for each (the URL being
    fetched or waited for, and the next one), never below the defaults and
    at most WIDE_MAX_CREDITS.
    Capped so that every child's slots together take at most half of the
    `files` the web server may have open (its open-file limit): each slot
    is a connection the server holds, and so is each connection a child
    keeps idle after a domain's last page (crawler-child/src/http.rs,
    `idle_keep`). Past the cap the server refuses connections (its accept
    fails, its listen queue overflows) and the crawl measures that, not
    itself: at 100,000 domains under a limit of 20,000 files, without the
    cap, robots.txt fetches failed by the tens of thousands."""
    per_child = math.ceil(hosts / max(1, supervisors * children))
    cap = max(64, (files - 4096) // max(1, 2 * supervisors * children))
    concurrency = max(64, min(per_child, cap))
    if concurrency < per_child:
        print(f"bench.py: {concurrency} fetch slots a child, not {per_child}: the web server may hold "
              f"{files} open files (raise the hard limit for more)", file=sys.stderr)
    return concurrency, max(256, min(2 * concurrency, WIDE_MAX_CREDITS))


def mid_rate(times, lo=0.1, hi=0.9):
    """Events per second between the time the `lo` share of `times` had
    happened and the time the `hi` share had: the steady rate, without the
    start (robots.txt, home pages) and the end (hosts finishing)."""
    t = sorted(times)
    a, b = int(len(t) * lo), int(len(t) * hi) - 1
    if len(t) < 20 or t[b] <= t[a]:
        return None
    return round((b - a) / (t[b] - t[a]), 1)


def politeness(args, dispatcher_flags, hosts, request_log, fetched_times, started, last_page):
    """The wide web's figures against its politeness limit."""
    gap = float(flag_value(dispatcher_flags, "--min-delay-ms") or DEFAULT_MIN_DELAY_MS) / 1000
    delay = args.response_delay_ms / 1000
    limit = hosts / (gap + delay)
    fetch_times, per_host, spans = [], {}, {}
    try:
        for r in request_records(request_log):
            if r["path"] == "/robots.txt":
                continue
            at = r["at_ms"] / 1000
            fetch_times.append(at)
            per_host[r["host"]] = per_host.get(r["host"], 0) + 1
            first, last = spans.get(r["host"], (at, at))
            spans[r["host"]] = (min(first, at), max(last, at))
    except OSError:
        pass
    pages_mid, fetches_mid = mid_rate(fetched_times), mid_rate(fetch_times)
    # Each host's own pace while it had work: its fetches after the first
    # over the time from its first to its last (a host that finished early
    # does not count as slow), summed over the hosts.
    steps = sum(n - 1 for n in per_host.values() if n > 1)
    busy = sum(spans[h][1] - spans[h][0] for h, n in per_host.items() if n > 1)
    cycle = busy / steps if steps else None
    # The shortest crawl politeness allows: a host's robots.txt, then each
    # of its fetches a gap after the last answer and `delay` long.
    ideal = max(per_host.values(), default=0) * (gap + delay)
    took = (last_page - started) if last_page else None
    ratio = lambda x: round(x / limit, 3) if x else None
    return {
        "gap_secs": gap,
        "response_delay_secs": delay,
        "hosts": hosts,
        "limit_per_sec": round(limit, 1),
        "how": "limit = hosts / (gap + response delay); rates between 10% and 90% of the pages (stored fetched_at) "
               "and of the page fetches (request log, robots.txt left out); host_cycle_secs: the mean time between "
               "two fetches of a host, from its first to its last",
        "pages_per_sec_mid80": pages_mid,
        "pages_over_limit": ratio(pages_mid),
        "fetches_per_sec_mid80": fetches_mid,
        "fetches_over_limit": ratio(fetches_mid),
        "host_cycle_secs": round(cycle, 3) if cycle else None,
        "host_pace_over_limit": round((gap + delay) / cycle, 3) if cycle else None,
        "fetches": len(fetch_times),
        "most_fetches_per_host": max(per_host.values(), default=0),
        "shortest_crawl_secs": round(ideal, 1),
        "crawl_secs": round(took, 1) if took else None,
        "shortest_over_crawl": round(ideal / took, 3) if took else None,
    }


def store_work(log_paths, pages):
    """The store's work per stored page, by collection and command: the
    `store work {json}` line every crawler process logs as it ends (from
    the driver's command monitoring, shared/store/src/work.rs), added up.
    A process killed before its end (none in a bench) is missing."""
    total, processes = {}, 0
    for path in log_paths:
        try:
            lines = open(path, errors="replace").read().splitlines()
        except OSError:
            continue
        for line in lines:
            at = line.find("store work {")
            if at < 0:
                continue
            try:
                work = json.loads(line[at + len("store work "):])["work"]
            except (ValueError, KeyError):
                continue
            processes += 1
            for key, w in work.items():
                t = total.setdefault(key, {"commands": 0, "documents": 0, "ms": 0})
                for k in t:
                    t[k] += w.get(k, 0)
    if not total:
        return None
    per = lambda n: round(n / max(pages, 1), 3)
    cells = {k: {"commands": v["commands"], "documents": v["documents"], "ms": v["ms"],
                 "commands_per_page": per(v["commands"]), "documents_per_page": per(v["documents"])}
             for k, v in sorted(total.items()) if not k.startswith("none.")}
    writes = [v for k, v in total.items() if k.split(".")[1] in ("insert", "update", "delete")]
    return {
        "processes": processes,
        "per_collection_command": cells,
        "commands_per_page": per(sum(v["commands"] for k, v in total.items() if not k.startswith("none."))),
        "write_commands_per_page": per(sum(v["commands"] for v in writes)),
        "written_documents_per_page": per(sum(v["documents"] for v in writes)),
        "how": "sum of the `store work` lines of every crawler process (driver command monitoring); per stored page",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="realistic")
    ap.add_argument("--web", choices=WEBS, default="synthweb",
                    help="synthweb (default); nginx: the same web from files; wide: many small slow sites at default politeness")
    ap.add_argument("--hosts", type=int, help="default: the profile's (realistic 200, small 50; --web wide 2,000)")
    ap.add_argument("--pages-per-host", type=int, help="default: the profile's (realistic 250, small 400; --web wide 25)")
    ap.add_argument("--response-delay-ms", type=int, default=WIDE_RESPONSE_DELAY_MS,
                    help="--web wide: every answer but robots.txt comes this late (default 300)")
    ap.add_argument("--nginx-workers", default="auto", help="--web nginx: worker_processes (default auto: one per core)")
    ap.add_argument("--nginx-gzip", choices=bench_nginx.GZIP_MODES, default="off",
                    help="--web nginx: off (default); on: compress each answer, as Debian's stock nginx.conf; "
                         "static: files compressed once, sent as they are (gzip_static)")
    ap.add_argument("--https", action="store_true",
                    help="--web wide: synthweb serves HTTPS (HTTP/2 by ALPN) with certificates of a CA made per run, "
                         "trusted by the crawl through --ca-file; prints TLS handshakes per domain")
    ap.add_argument("--dns", action="store_true",
                    help="--web wide: names resolved only through synthweb's DNS server (--dns-server; 20-100 ms an "
                         "answer, 1%% NXDOMAIN, 0.5%% never answered), no hosts file; prints DNS lookups per domain")
    ap.add_argument("--supervisors", type=int, default=2)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--timing-log", action="store_true", help="also write timing logs (to measure their cost)")
    ap.add_argument("--dispatcher-arg", action="append", default=[], help="extra dispatcher flag (after the profile's)")
    ap.add_argument("--supervisor-arg", action="append", default=[])
    ap.add_argument("--web-arg", action="append", default=[], help="extra synthweb flag (e.g. --web-arg=--page-bytes=8000)")
    ap.add_argument("--crawler-bin-dir", default=BIN,
                    help="where dispatcher, supervisor and crawler-child are (e.g. another commit's build, to compare); synthweb always comes from this tree")
    ap.add_argument("--node-cpu-quota", type=float, metavar="CORES",
                    help="run each supervisor and its children in a cgroup limited to CORES of CPU (needs root)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, request log, the store's data) and print it")
    args = ap.parse_args()
    if (args.https or args.dns) and args.web != "wide":
        ap.error("--https and --dns go with --web wide")

    hosts, pages_per_host = WIDE_COUNTS if args.web == "wide" else DEFAULT_COUNTS[args.profile]
    hosts = args.hosts if args.hosts is not None else hosts
    pages_per_host = args.pages_per_host if args.pages_per_host is not None else pages_per_host
    # SIGTERM ends the bench as Ctrl-C does: through the `finally` that stops what it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    dispatcher_flags = PROFILES[args.profile] + args.dispatcher_arg
    supervisor_flags = list(args.supervisor_arg)
    web_role = "nginx" if args.web == "nginx" else "synthweb"
    if args.web == "wide":
        # A connection per host at the web and its own at each child, plus the store's and the logs.
        files = raise_fd_limit(2 * hosts + 4096)
        # Default politeness; slots and credits for every domain (wide_capacity).
        concurrency, capacity = wide_capacity(hosts, args.supervisors, args.children, files)
        dispatcher_flags = (without_flags(PROFILES[args.profile], POLITENESS_FLAGS + ("--child-concurrency",))
                            + ["--child-concurrency", str(concurrency)] + args.dispatcher_arg)
        if flag_value(supervisor_flags, "--child-capacity") is None:
            # (The supervisor refuses a flag given twice: the user's wins.)
            supervisor_flags = ["--child-capacity", str(capacity)] + supervisor_flags
        check_ports(min(2 * hosts, 2 * concurrency * args.supervisors * args.children))
    work = tempfile.mkdtemp(prefix="crawler-bench-")
    uri, kind, store_dir = start_store(work, args.keep)
    store_pid = int(open(os.path.join(store_dir, "pid")).read())
    db = os.environ.get("CRAWLER_DB", "crawler")
    procs, ok, cgroups, nginx = [], False, [], None
    try:
        if args.web == "nginx":
            nginx, paths, info = start_nginx(args, work, hosts, pages_per_host)
            web = nginx.proc
        else:
            extra = ["--response-delay-ms", str(args.response_delay_ms)] if args.web == "wide" else []
            extra += ["--write-stats", os.path.join(work, "web-stats.json")]
            if args.https:
                extra += ["--tls-ca-out", os.path.join(work, "ca.pem")]
                supervisor_flags += ["--ca-file", os.path.join(work, "ca.pem")]
            if args.dns:
                dns_addr = f"127.0.0.1:{free_port()}"
                extra += ["--dns-listen", dns_addr]
                supervisor_flags += ["--dns-server", dns_addr]
                # Its answers are 127.0.0.1: an internal address, reached through DNS only with the opt-in.
                dispatcher_flags += ["--allow-private-networks"]
            web, paths, info = start_web(args, work, hosts, pages_per_host, extra)
            procs.append(web)
        seeds, hosts_file, request_log = paths["seeds"], paths["hosts"], paths["request_log"]
        delay_hosts = set(info["crawl_delay_hosts"])
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        common = ["--mongo-uri", uri]
        # A fresh cluster secret per run, in the environment (never on a
        # command line; binaries from before the secret just ignore it).
        crawler_env = dict(os.environ, CRAWLER_CLUSTER_SECRET=secrets.token_hex(32))
        if args.timing_log:
            common += ["--timing-log", os.path.join(work, "logs") + "/"]
        summary_file = os.path.join(work, "summary.json")
        # The web server's processes: synthweb, or nginx's master and workers.
        web_pids = [web.pid] + children_of({web.pid})
        web_cpu0 = {pid: s[1] for pid in web_pids if (s := proc_sample(pid))}
        web_w0 = sum(wchar(pid) or 0 for pid in web_pids)
        store_cpu0 = {}
        for pid in [store_pid] + children_of({store_pid}):
            s = proc_sample(pid)
            if s:
                store_cpu0[pid] = s[1]
        bench_cpu0 = sum(os.times()[:2])
        samples = [(time.time(),) + cpu_times() + ({}, web_w0)]
        started = time.time()
        dispatcher = subprocess.Popen(
            [os.path.join(args.crawler_bin_dir, "dispatcher"), "--bind", endpoint, "--seeds", seeds,
             "--min-supervisors", str(args.supervisors), "--summary-file", summary_file, "--progress-secs", "5"]
            + common + dispatcher_flags,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "dispatcher.log"), "w"), env=crawler_env)
        if args.node_cpu_quota:
            cgroups = [NodeCgroup(f"crawler-bench-{os.getpid()}-node{i}", args.node_cpu_quota)
                       for i in range(args.supervisors)]
        sups = [subprocess.Popen(
            [os.path.join(args.crawler_bin_dir, "supervisor"), "--dispatcher", endpoint, "--id", f"sup{i}",
             "--children", str(args.children)] + ([] if args.dns else ["--hosts-file", hosts_file])
            + common + supervisor_flags,
            stderr=open(os.path.join(work, f"supervisor{i}.log"), "w"), env=crawler_env,
            preexec_fn=cgroups[i].enter if cgroups else None) for i in range(args.supervisors)]
        procs += [dispatcher] + sups

        peak = {}  # role -> max VmHWM KiB
        cpu_by_pid = {}  # pid -> (role, cpu seconds)
        rusage = {}
        live = {p.pid: p for p in [dispatcher] + sups}
        tracked, store_pids, next_scan, next_stat = [], [store_pid], 0.0, started + 1
        dispatcher_rss, next_rss = [], started
        child_rss = []  # (secs, sum of the children's VmRSS KiB, the largest), every 2 s
        web_w1 = web_w0
        while live:
            now = time.time()
            if now >= next_scan:
                pp = parents()
                tracked = list(live) + [pid for pid, ppid in pp.items() if ppid in live]
                store_pids = [store_pid] + [pid for pid, ppid in pp.items() if ppid == store_pid]
                web_pids = [web.pid] + [pid for pid, ppid in pp.items() if ppid == web.pid]
                next_scan = now + 1
            if now >= next_rss:
                kib = rss_kib(dispatcher.pid)
                if kib is not None:
                    dispatcher_rss.append([round(now - started, 1), round(kib / 1024, 1)])
                next_rss += 5
            if not child_rss or now - started >= child_rss[-1][0] + 2:
                kids = [k for pid in tracked if (s0 := proc_sample(pid)) and s0[0] == "crawler-child"
                        and (k := rss_kib(pid)) is not None]
                if kids:
                    child_rss.append((now - started, sum(kids), max(kids)))
            if now >= next_stat:
                samples.append((now,) + cpu_times() + (role_cpu(cpu_by_pid), web_w1))
                next_stat += 1
            for pid in tracked:
                s = proc_sample(pid)
                if s and s[0] in ROLES:
                    peak[s[0]] = max(peak.get(s[0], 0), s[2])
                    cpu_by_pid[pid] = (s[0], s[1])
            for pid in store_pids:
                s = proc_sample(pid)
                if s:
                    peak["store"] = max(peak.get("store", 0), s[2])
                    cpu_by_pid[("store", pid)] = ("store", s[1] - store_cpu0.get(pid, 0))
            w = 0
            for pid in web_pids:
                s = proc_sample(pid)
                if s:
                    peak[web_role] = max(peak.get(web_role, 0), s[2])
                    cpu_by_pid[("web", pid)] = (web_role, s[1] - web_cpu0.get(pid, 0))
                    w += wchar(pid) or 0
            web_w1 = max(web_w1, w)
            for pid in list(live):
                res = os.wait4(pid, os.WNOHANG)
                if res[0] == pid:
                    rusage[pid] = (res[1], res[2])
                    del live[pid]
            time.sleep(0.2)
        wall = time.time() - started
        samples.append((time.time(),) + cpu_times() + (role_cpu(cpu_by_pid), web_w1))
        bench_cpu = sum(os.times()[:2]) - bench_cpu0
        web_connections = None
        if nginx:
            nginx.stop()
        else:
            web.send_signal(signal.SIGTERM)
            web.wait(timeout=60)
            web_connections = synthweb_connections(web)

        summary = json.load(open(summary_file))
        pages = summary["fetched"]
        codes = [os.waitstatus_to_exitcode(st) for st, _ in rusage.values()]
        exact_cpu = sum(r.ru_utime + r.ru_stime for _, r in rusage.values())
        by_role = role_cpu(cpu_by_pid)
        machine_busy = (samples[-1][1] - samples[0][1]) - (samples[-1][2] - samples[0][2])
        machine_busy_secs = machine_busy / TICK

        st = query_store(uri, db)
        fetched = st.pop("fetched", [])
        host = lambda domain: domain.split(":")[0]
        nd = [t for d, t in fetched if host(d) not in delay_hosts]
        no_delay = None
        if nd:
            span = max(nd) - started
            no_delay = {
                "hosts": info["spec"]["hosts"] - len(delay_hosts),
                "pages": len(nd),
                "expected_pages": info["expected_pages_without_crawl_delay"],
                "secs_to_last": round(span, 2),
                "pages_per_sec": round(len(nd) / span, 1),
                "how": "store pages documents of the hosts without Crawl-delay; dispatcher start to their last fetched_at",
            }
        docs = st.get("documents") or 0
        stored = {"method": st.get("method"), "documents": docs}
        if docs and "bson_bytes" in st:
            stored["bytes_per_page"] = round(st["bson_bytes"] / docs)
        if st.get("with_body"):
            stored["body_bytes_per_page"] = round(st["body_bytes"] / st["with_body"])
            stored["raw_html_bytes_per_page"] = round(st["raw_bytes"] / st["with_body"])
            stored["pages_with_body"] = st["with_body"]
        if "error" in st or "body_error" in st:
            stored["error"] = st.get("error") or st.get("body_error")

        swork = store_work([os.path.join(work, "dispatcher.log")]
                          + [os.path.join(work, f"supervisor{i}.log") for i in range(args.supervisors)], docs)
        if nginx:
            reqs = bench_nginx.read_access_log(request_log, started) or {}
        else:
            reqs = read_request_log(request_log, started,
                                    frozenset(info.get("must_not_fetch_requests") or ())) or {}
        web_cpu = by_role.get(web_role, 0.0)
        served = reqs["bytes_sent"] if "bytes_sent" in reqs else (web_w1 - web_w0)
        rates = [(y[4] - x[4]) / (y[0] - x[0]) for x, y in zip(samples, samples[1:])
                 if x[4] is not None and y[4] is not None and y[0] > x[0]]
        web_server = {
            "requests": reqs.get("requests"),
            "requests_per_sec": round(reqs.get("requests", 0) / wall, 1),
            "peak_requests_per_sec": reqs.get("peak_per_sec"),
            "mb_per_sec": round(served / wall / 1e6, 2) if served is not None else None,
            "peak_mb_per_sec": round(max(rates, default=0) / 1e6, 2),
            "cpu_secs": round(web_cpu, 2),
            "cpu_percent_of_one_core": round(web_cpu / wall * 100, 1),
            "share_of_machine_cpu_used_percent": round(web_cpu / machine_busy_secs * 100, 1) if machine_busy_secs else None,
            "status": reqs.get("status"),
            "robots_violations": reqs.get("robots_violations"),
        }
        if web_role != "synthweb":
            web_server["server"] = web_role
        if "connections" in reqs:
            web_server["connections"] = reqs["connections"]
        elif web_connections:
            web_server["connections"] = {
                "count": web_connections,
                "requests_per_connection": round(reqs.get("requests", 0) / web_connections, 1),
                "how": "connections synthweb accepted (its exit line)"}
        per_page = lambda secs: round(secs * 1000 / max(pages, 1), 3)
        result = {
            "profile": args.profile,
            "web": {k: info["spec"][k] for k in ("hosts", "pages_per_host", "page_bytes", "links_per_page")}
            | {"crawl_delay_hosts": sorted(delay_hosts), "expected_pages": info["expected_pages"]},
            "setup": {"supervisors": args.supervisors, "children": args.children,
                      "dispatcher_flags": dispatcher_flags, "cpus": NCPU}
            | ({"web": args.web, "supervisor_flags": supervisor_flags} if args.web != "synthweb" else {})
            | ({"nginx": {"workers": args.nginx_workers, "gzip": args.nginx_gzip}} if nginx else {}),
            "store": kind,
            "pages": pages,
            "stored_pages": docs,
            "wall_secs": round(wall, 2),
            "pages_per_sec": round(pages / wall, 1),
            "no_delay": no_delay,
            "main_phase": main_phase([t for _, t in fetched], started, samples, web_role),
            "machine_cpu_percent_whole_run": round(machine_busy / max(samples[-1][1] - samples[0][1], 1) * 100, 1),
            "cpu_ms_per_page": {role: per_page(by_role.get(role, 0.0)) for role in ROLES + ("store", web_role)},
            "cpu_secs": {role: round(by_role.get(role, 0.0), 2) for role in ROLES + ("store", web_role)}
            | {"bench.py": round(bench_cpu, 2)},
            "crawler_cpu_exact_secs": round(exact_cpu, 2),
            "web_server": web_server,
            "stored_bytes_per_page": stored,
            "peak_rss_mib": {k: round(v / 1024, 1) for k, v in sorted(peak.items())},
            "tenths": tenths(nd, started) or progress_tenths(os.path.join(work, "dispatcher.log")),
            "dispatcher_rss_mib": dispatcher_rss,
            "collections": st.get("collections"),
            "store_work": swork,
            "node_cpu_quota": args.node_cpu_quota,
            "exit_codes": codes,
            "timing_log": args.timing_log,
        }
        truth = ground_truth(info, st, dns=args.dns)
        if truth:
            result["ground_truth"] = truth
        if st.get("field_bytes"):
            stored["field_bytes_per_page"] = st["field_bytes"]
        if args.web == "wide":
            result["politeness"] = politeness(args, dispatcher_flags, info["spec"]["hosts"], request_log,
                                              [t for _, t in fetched], started, max((t for _, t in fetched), default=None))
        stats_path = os.path.join(work, "web-stats.json")
        if os.path.exists(stats_path):
            result["open_web"] = open_web_figures(args, info, json.load(open(stats_path)), reqs, fetched,
                                                  started, child_rss, os.path.join(work, "dispatcher.log"))
        human(result)
        print(json.dumps(result, indent=2))
        ok = all(c == 0 for c in codes)
        return 0 if ok else 1
    finally:
        if nginx:
            nginx.stop()
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.call([os.path.join(ROOT, "scripts", "store.sh"), "stop", store_dir])
        for c in cgroups:
            c.remove()
        if args.keep or not ok:
            print(f"work directory: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def progress_times(dispatcher_log):
    """Seconds since the dispatcher started at which it had stored each
    page, from its progress lines (`[  12.3s] pages  4567 | ...`, every
    5 s), one entry a page: the shares of the crawl where the stored pages'
    own times are not read (a store of more than BIG pages)."""
    points = []
    try:
        with open(dispatcher_log) as f:
            for line in f:
                words = line.replace("[", " ").replace("s]", " ").split()
                if len(words) >= 3 and words[1] == "pages":
                    try:
                        points.append((float(words[0]), int(words[2])))
                    except ValueError:
                        continue
    except OSError:
        return []
    times, done = [], 0
    for secs, pages in points:
        times.extend([secs] * max(0, pages - done))
        done = max(done, pages)
    return times


def open_web_figures(args, info, stats, reqs, fetched, started, child_rss, dispatcher_log):
    """Handshakes and DNS lookups per domain (synthweb's counts), and the
    children's memory at 10, 50 and 100 % of the crawl (by stored pages:
    their fetch times, or the dispatcher's progress when those are not read)."""
    domains = info["spec"]["hosts"] + info["spec"].get("outside_hosts", 0)
    out = {"domains": domains, "https": args.https, "dns": args.dns, "web_stats": stats}
    if args.https:
        hs = stats["handshakes"]
        out["handshakes_per_domain"] = {k: round(hs[k] / max(domains, 1), 3) for k in ("full", "resumed", "failed")}
        out["handshakes_per_page"] = round((hs["full"] + hs["resumed"]) / max(reqs.get("requests", 0), 1), 4)
    if args.dns:
        d = stats["dns"]
        failing = len(info.get("dns_failing_hosts", []))
        out["dns_lookups_per_domain"] = round(d["queries"] / max(d["names_asked"], 1), 3)
        out["dns_lookups_per_answering_domain"] = round(d["answering_queries"] / max(d["answering_names_asked"], 1), 3)
        out["dns_failing_domains"] = failing
        out["expected_pages_resolving"] = info.get("expected_pages_resolving")
    times = sorted(t - started for _, t in fetched) or progress_times(dispatcher_log)
    mem = {}
    for share in (10, 50, 100):
        if not times or not child_rss:
            break
        at = times[min(len(times) - 1, max(0, len(times) * share // 100 - 1))]
        secs, total, largest = min(child_rss, key=lambda r: abs(r[0] - at))
        mem[f"{share}%"] = {"secs": round(secs, 1), "children_rss_mib": round(total / 1024, 1),
                            "largest_child_rss_mib": round(largest / 1024, 1)}
    out["child_memory"] = mem
    if "10%" in mem and "100%" in mem:
        out["child_memory_growth_10_to_100"] = round(
            mem["100%"]["children_rss_mib"] / max(mem["10%"]["children_rss_mib"], 0.1), 3)
    return out


def human(r):
    e = lambda *a: print(*a, file=sys.stderr)
    w = r["web"]
    e(f"== {r['profile']} web{' (' + r['setup']['web'] + ')' if r['setup'].get('web') else ''}: "
      f"{w['hosts']} hosts x {w['pages_per_host']} pages, {w['expected_pages']} URLs to store; "
      f"store {r['store']}; {r['setup']['supervisors']} supervisors x {r['setup']['children']} children")
    e(f"pages {r['pages']} in {r['wall_secs']} s: {r['pages_per_sec']} pages/s overall")
    ow = r.get("open_web")
    if ow:
        if ow["https"]:
            e(f"TLS handshakes per domain: {ow['handshakes_per_domain']} ({ow['handshakes_per_page']} per request)")
        if ow["dns"]:
            e(f"DNS lookups per domain: {ow['dns_lookups_per_domain']} ({ow['dns_lookups_per_answering_domain']} for "
              f"the names that answer; {ow['dns_failing_domains']} domains fail: "
              f"{ow['expected_pages_resolving']} pages can be stored)")
        if ow["child_memory"]:
            e("children's RSS at 10/50/100 % of the crawl: " + ", ".join(
                f"{k} {v['children_rss_mib']} MiB (largest {v['largest_child_rss_mib']})" for k, v in ow["child_memory"].items())
              + f"; 100 %/10 %: {ow.get('child_memory_growth_10_to_100')}")
    nd = r["no_delay"]
    if nd:
        e(f"hosts without Crawl-delay: {nd['pages']} pages in {nd['secs_to_last']} s: {nd['pages_per_sec']} pages/s")
    mp = r["main_phase"]
    if mp:
        e(f"main phase {mp['start_secs']}-{mp['end_secs']} s: {mp['pages_per_sec']} pages/s (peak {mp['peak_pages_per_sec']}), "
          f"machine CPU {mp['machine_cpu_percent']}% ({mp['machine_cpu_cores']} of {r['setup']['cpus']} cores, "
          f"{mp['cores_of_bench_processes']} by the bench's processes: "
          + ", ".join(f"{k} {v}" for k, v in mp["cores_by_role"].items()) + ")")
    e("CPU ms/page, whole run: " + ", ".join(f"{k} {v}" for k, v in r["cpu_ms_per_page"].items()))
    if mp:
        e("CPU ms/page, main phase: " + ", ".join(f"{k} {v}" for k, v in mp["cpu_ms_per_page"].items()))
    ws = r["web_server"]
    name = ws.get("server", "synthweb")
    e(f"{name}: {ws['requests_per_sec']} req/s ({ws['peak_requests_per_sec']} in its busiest second), "
      f"{ws['mb_per_sec']} MB/s ({ws['peak_mb_per_sec']} peak), {ws['cpu_percent_of_one_core']}% of a core, "
      f"{ws['share_of_machine_cpu_used_percent']}% of the CPU the machine used"
      + (f" ({mp[name + '_share_of_machine_cpu_percent']}% in the main phase)" if mp else ""))
    conns = ws.get("connections")
    if conns:
        e(f"{name} connections: {conns['count']}, {conns['requests_per_connection']} requests each on average")
    if ws.get("robots_violations") is not None:
        e(("WARNING: " if ws["robots_violations"] else "")
          + f"robots.txt: {ws['robots_violations']} requests to URLs it forbids")
    gt = r.get("ground_truth")
    if gt and not gt["matches"]:
        e(f"WARNING: stored pages differ from the ground truth: stored {gt['stored_by_status']}, "
          f"expected {gt['expected_by_status']}")
    pol = r.get("politeness")
    if pol:
        e(f"politeness limit {pol['hosts']} hosts / ({pol['gap_secs']} s gap + {pol['response_delay_secs']} s answer) = "
          f"{pol['limit_per_sec']}/s: pages {pol['pages_per_sec_mid80']}/s ({pol['pages_over_limit']} of it), "
          f"fetches {pol['fetches_per_sec_mid80']}/s ({pol['fetches_over_limit']} of it) between 10% and 90% done; "
          f"a host every {pol['host_cycle_secs']} s ({pol['host_pace_over_limit']} of the limit's pace); "
          f"crawl {pol['crawl_secs']} s against {pol['shortest_crawl_secs']} s at the limit "
          f"({pol['shortest_over_crawl']})")
    sw = r.get("store_work")
    if sw:
        e(f"store work per stored page: {sw['commands_per_page']} commands ({sw['write_commands_per_page']} writes "
          f"carrying {sw['written_documents_per_page']} documents): "
          + ", ".join(f"{k} {v['commands_per_page']} cmd/{v['documents_per_page']} docs"
                      for k, v in sw["per_collection_command"].items()
                      if v["commands_per_page"] >= 0.001 or v["documents_per_page"] >= 0.001))
    sb = r["stored_bytes_per_page"]
    e(f"stored: {sb.get('bytes_per_page')} B/page ({sb.get('method')}), body {sb.get('body_bytes_per_page')} B "
      f"compressed from {sb.get('raw_html_bytes_per_page')} B")
    e("peak RSS MiB: " + ", ".join(f"{k} {v}" for k, v in r["peak_rss_mib"].items()))
    t = r.get("tenths")
    if t:
        e(f"tenths of the run ({t['secs_each']} s each), pages/s without Crawl-delay: "
          + " ".join(str(x) for x in t["pages_per_sec"]) + f"; last/first {t['last_over_first']}")
    if r.get("node_cpu_quota"):
        e(f"each node (supervisor + children) limited to {r['node_cpu_quota']} cores")


if __name__ == "__main__":
    sys.exit(main())
