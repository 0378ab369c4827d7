"""pytest plugin (-p llama_suite_plugin) for running llama.cpp's server tests on generated models.

- Maps the hub models of the ServerPreset methods to local files (LLAMA_SUITE_MODELS, a JSON
  object written by test/llama-suite/run.ts) and makes ServerPreset.load_all a no-op: nothing is
  downloaded.
- Answers requests.get of the hub URLs in LLAMA_SUITE_URL_MAP (test images) with local files.
- Starts every server with --threads LLAMA_SUITE_THREADS (default 1).
- Fails a test that runs longer than LLAMA_SUITE_TEST_TIMEOUT seconds (SIGALRM; pytest-timeout is
  not installed here).
- Records each test's outcome, failure message, the last HTTP exchanges with the server and the
  server's error lines, and writes them as JSON to LLAMA_SUITE_REPORT at the end of the session.
"""
import json
import os
import re
import signal

import pytest

_models = json.loads(os.environ.get("LLAMA_SUITE_MODELS", "{}"))
_timeout = int(os.environ.get("LLAMA_SUITE_TEST_TIMEOUT", "180"))
_threads = int(os.environ.get("LLAMA_SUITE_THREADS", "1"))
_url_map = json.loads(os.environ.get("LLAMA_SUITE_URL_MAP", "{}"))
_results = {}
_exchanges = []

# preset name -> (model key, mmproj key or None)
PRESET_MODELS = {
    "tinyllama2": ("stories260k", None),
    "tinyllama_infill": ("stories260kInfill", None),
    "stories15m_moe": ("stories15mMoe", None),
    "bert_bge_small": ("bertBgeSmall", None),
    "bert_bge_small_with_fa": ("bertBgeSmall", None),
    "jina_reranker_tiny": ("jinaRerankerTiny", None),
    "tinygemma3": ("tinygemma3", "tinygemma3Mmproj"),
}

_TRUNC = 600


def _short(value, limit=_TRUNC):
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _install_presets(utils):
    preset_cls = utils.ServerPreset
    process_cls = utils.ServerProcess
    # A bare ServerProcess() defaults to stories260K from the hub.
    process_cls.model_hf_repo = None
    process_cls.model_hf_file = None
    process_cls.model_file = _models["stories260k"]
    process_cls.mmproj_file = None
    # --threads N on every start, for both servers: on a shared 2-core machine ggml's spinning
    # worker threads make a busy run about 15x slower than one thread.
    process_cls.n_threads = _threads
    for name, (model_key, mmproj_key) in PRESET_MODELS.items():
        original = getattr(preset_cls, name)

        def preset(original=original, model_key=model_key, mmproj_key=mmproj_key):
            server = original()
            server.model_hf_repo = None
            server.model_hf_file = None
            server.model_file = _models[model_key]
            if mmproj_key:
                server.mmproj_file = _models[mmproj_key]
            return server

        setattr(preset_cls, name, staticmethod(preset))
    preset_cls.load_all = staticmethod(lambda: None)


def _install_exchange_log(utils):
    process_cls = utils.ServerProcess
    make_request = process_cls.make_request
    make_stream_request = process_cls.make_stream_request
    start = process_cls.start

    def start_unlogged(self, *args, **kwargs):
        # start() polls /health until the server answers; those polls are not the test's exchanges.
        self._llama_suite_starting = True
        try:
            return start(self, *args, **kwargs)
        finally:
            self._llama_suite_starting = False

    def logged_request(self, method, path, data=None, headers=None, *args, **kwargs):
        if getattr(self, "_llama_suite_starting", False):
            return make_request(self, method, path, data, headers, *args, **kwargs)
        entry = {"method": method, "path": path, "sent": _short(data) if data is not None else None}
        _exchanges.append(entry)
        try:
            res = make_request(self, method, path, data, headers, *args, **kwargs)
        except Exception as e:
            entry["error"] = _short(f"{type(e).__name__}: {e}")
            raise
        entry["status"] = res.status_code
        entry["answer"] = _short(res.body)
        return res

    def logged_stream(self, method, path, data=None, headers=None, *args, **kwargs):
        entry = {"method": method, "path": path, "sent": _short(data) if data is not None else None, "stream": True, "events": 0}
        _exchanges.append(entry)
        try:
            for event in make_stream_request(self, method, path, data, headers, *args, **kwargs):
                entry["events"] += 1
                if entry["events"] <= 2:
                    entry[f"event{entry['events']}"] = _short(event, 400)
                entry["last_event"] = _short(event, 400)
                yield event
        except utils.ServerError as e:
            entry["status"] = e.code
            entry["answer"] = _short(e.body)
            raise
        except Exception as e:
            entry["error"] = _short(f"{type(e).__name__}: {e}")
            raise

    process_cls.start = start_unlogged
    process_cls.make_request = logged_request
    process_cls.make_stream_request = logged_stream


def _install_offline_requests():
    """requests.get of an https URL whose file name LLAMA_SUITE_URL_MAP maps answers that file (test images)."""
    import requests

    real_get = requests.get

    def get(url, *args, **kwargs):
        name = str(url).split("?")[0].split("/")[-1]
        if str(url).startswith("https://") and name in _url_map:
            res = requests.models.Response()
            res.status_code = 200
            res.url = str(url)
            with open(_url_map[name], "rb") as f:
                res._content = f.read()
            return res
        return real_get(url, *args, **kwargs)

    requests.get = get


def pytest_configure(config):
    import utils  # the suite's utils.py, from the copy's tests directory (rootdir)

    _install_presets(utils)
    _install_exchange_log(utils)
    _install_offline_requests()


def _on_alarm(signum, frame):
    raise TimeoutError(f"llama-suite: test ran longer than {_timeout} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    os.environ["LLAMA_SUITE_TEST_ID"] = item.nodeid
    _exchanges.clear()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(_timeout)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


_SERVER_LINE = re.compile(r"(inference-server|error|unknown option|Server process died|exception)", re.IGNORECASE)


def _server_lines(report):
    lines = []
    for title, text in report.sections:
        if not title.startswith("Captured std"):
            continue
        for line in text.splitlines():
            # The suite prints answers as indented JSON; only unindented lines are the servers' own.
            if _SERVER_LINE.search(line) and not line.startswith((" ", "{", "}", "Response from server", "Partial response")) and len(lines) < 8:
                lines.append(_short(line, 300))
    return lines


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0})
    entry["duration"] += report.duration
    if report.when == "call":
        entry["starts"] = [line for title, text in report.sections if title.startswith("Captured stdout")
                           for line in text.splitlines() if line.startswith("tests: starting server with:")][:3]
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        entry["outcome"] = "skipped"
        entry["reason"] = reason.removeprefix("Skipped: ")
    elif report.failed and entry["outcome"] != "failed":
        entry["outcome"] = "failed" if report.when == "call" else "error"
        crash = getattr(report.longrepr, "reprcrash", None)
        entry["phase"] = report.when
        entry["message"] = _short(crash.message if crash else str(report.longrepr), 1200)
        entry["line"] = crash.lineno if crash else None
        entry["exchanges"] = list(_exchanges[-3:])
        entry["server"] = _server_lines(report)
        if "starts" not in entry:
            entry["starts"] = []


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("LLAMA_SUITE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(_results, f, indent=1)
