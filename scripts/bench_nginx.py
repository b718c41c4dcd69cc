"""nginx for `bench.py --web nginx`: the benchmark's synthetic web, written
to files by `synthweb --dump`, served by Debian's nginx on a loopback port.

The bench starts it as it starts the store: its own config, pid file, error
and access logs in the bench's work directory (WORK/nginx/), on a free port
of 127.0.0.1, and stops it on every exit (SIGQUIT, then SIGTERM, then
SIGKILL; and the kernel sends it SIGTERM if the bench itself dies).

The settings (written by `config`), and why:
- Debian's defaults a real site keeps: `worker_processes auto` (one worker
  per core: 2 here; `--nginx-workers` to change), `sendfile on`,
  `tcp_nopush on`, `tcp_nodelay on`, keep-alive on (`keepalive_timeout`
  75 s), ETag and Last-Modified on static files, the `Server` header, an
  access log.
- Raised so that nginx is not the limit: `worker_connections 8192` (the
  crawl holds up to 8 connections per host and child: 1,600 for 200 hosts;
  Debian's 768 per worker could run out), `worker_rlimit_nofile 16384`,
  `keepalive_requests 10000` (nginx's default, 1,000, closes a connection
  after 1,000 requests: a host of the realistic web is about 280).
- The access log is buffered (`buffer=256k flush=1s`), as busy sites do:
  a write(2) per request would be CPU spent for the bench's sake. It logs
  what synthweb's --request-log does (host, path, status, time) plus the
  connection's serial number and its request count, to count connections.
- `gzip` off by default, so the same bytes go over the wire as from
  synthweb. `--nginx-gzip on` is Debian's stock `gzip on` (text/html,
  level 1): nginx compresses every answer, on the cores the crawl uses.
  `--nginx-gzip static`: the files are compressed once when written
  (`gzip -k -6`, as sites that precompress do) and sent as they are
  (`gzip_static on`), so the crawler inflates every page (it sends
  Accept-Encoding: gzip, br) while nginx spends nothing on it.
"""
import json, os, shutil, signal, socket, subprocess, sys, time

PACKAGE = "nginx-light"
INSTALL = f"apt-get install -y {PACKAGE}"

# Fields of each access-log line: what synthweb's request log has, with
# the time in seconds ($msec), and the connection's serial number and
# how many requests it has carried.
LOG_FORMAT = ('{"host":"$host","path":"$request_uri","status":$status,"at":$msec,'
              '"conn":$connection,"conn_requests":$connection_requests,"bytes":$bytes_sent}')

CONF = """# Written by scripts/bench_nginx.py for one bench run.
daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile 16384;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 8192;
}}
http {{
    include {web}/nginx-http.conf;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    log_format bench escape=json '{log_format}';
    access_log {dir}/access.jsonl bench buffer=256k flush=1s;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 10000;
    gzip {gzip};
    gzip_static {gzip_static};
    server {{
        listen 127.0.0.1:{port};
        server_name _;
        include {web}/nginx-server.conf;
    }}
}}
"""


def binary():
    """The nginx binary, or None."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def ensure_installed():
    """The nginx binary; installs Debian's package (as root, with apt-get)
    when it is missing, saying so, or exits with the one command to run."""
    found = binary()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit(f"bench.py --web nginx needs nginx, which is not installed: run `sudo {INSTALL}`")
    print(f"bench.py: nginx is not installed; installing Debian's {PACKAGE} ({INSTALL})", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.call(INSTALL.split(), env=env, stdout=sys.stderr) != 0:
        raise SystemExit(f"bench.py: `{INSTALL}` failed; install nginx and run again")
    found = binary()
    if not found:
        raise SystemExit(f"bench.py: no nginx binary after `{INSTALL}`")
    return found


GZIP_MODES = ("off", "on", "static")


def config(directory, web, port, workers, gzip):
    return CONF.format(dir=directory, web=web, port=port, workers=workers,
                       gzip="on" if gzip == "on" else "off",
                       gzip_static="on" if gzip == "static" else "off", log_format=LOG_FORMAT)


def precompress(web):
    """`gzip -k -6` every file under WEB/hosts (what `gzip_static` sends)."""
    hosts = os.path.join(web, "hosts")
    if subprocess.call(["gzip", "-k", "-6", "-r", hosts]) != 0:
        raise SystemExit(f"bench.py: gzip -k -6 -r {hosts} failed")


def _die_with_parent():
    """Popen preexec_fn: SIGTERM to this process when the bench dies."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Nginx:
    """One nginx serving WEB (a `synthweb --dump` directory) on 127.0.0.1:PORT."""

    def __init__(self, work, web, port, workers="auto", gzip="off"):
        self.dir = os.path.join(work, "nginx")
        self.web, self.port = os.path.abspath(web), port
        self.workers, self.gzip = workers, gzip
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.access_log = os.path.join(self.dir, "access.jsonl")
        self.error_log = os.path.join(self.dir, "error.log")
        self.proc = None

    def start(self, timeout=30):
        exe = ensure_installed()
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(config(self.dir, self.web, self.port, self.workers, self.gzip))
        # The workers run as nobody when the bench is root: they must reach
        # the files through the work directory (mkdtemp makes it 0700).
        for d in (os.path.dirname(self.dir), self.dir):
            os.chmod(d, 0o711)
        test = subprocess.run([exe, "-t", "-q", "-c", self.conf, "-p", self.dir, "-e", self.error_log],
                              capture_output=True, text=True)
        if test.returncode != 0:
            raise SystemExit(f"bench.py: nginx refused its config {self.conf}: {test.stderr.strip()}")
        self.proc = subprocess.Popen([exe, "-c", self.conf, "-p", self.dir, "-e", self.error_log],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.dir, "stderr.log"), "w"),
                                     preexec_fn=_die_with_parent)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"bench.py: nginx exited with {self.proc.returncode}; see {self.error_log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit(f"bench.py: nginx did not listen on 127.0.0.1:{self.port} within {timeout} s")

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def stop(self, timeout=15):
        """Graceful stop (SIGQUIT: open requests end, the log is flushed),
        then SIGTERM, then SIGKILL."""
        if not self.proc or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGQUIT, timeout), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


def read_access_log(path, t0):
    """What bench.py's request-log reader gives for synthweb, and the
    connections: how many served the requests and how many requests each."""
    if not os.path.exists(path):
        return None
    n, robots, per_sec, status, conns, sent = 0, 0, {}, {}, {}, 0
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            n += 1
            robots += r["path"] == "/robots.txt"
            s = int(r["at"] - t0)
            per_sec[s] = per_sec.get(s, 0) + 1
            status[str(r["status"])] = status.get(str(r["status"]), 0) + 1
            conns[r["conn"]] = max(conns.get(r["conn"], 0), r["conn_requests"])
            sent += r.get("bytes", 0)
    counts = sorted(conns.values())
    return {"requests": n, "robots": robots, "peak_per_sec": max(per_sec.values(), default=0), "status": status,
            "bytes_sent": sent,
            "connections": {"count": len(conns),
                            "requests_per_connection": round(n / len(conns), 1) if conns else None,
                            "median_requests": counts[len(counts) // 2] if counts else None,
                            "max_requests": counts[-1] if counts else None,
                            "with_one_request": sum(1 for c in counts if c == 1),
                            "how": "nginx access log: $connection serial numbers and their $connection_requests"}}
