"""llama-cpp-python's OpenAI-compatible server on 127.0.0.1, for tests that need a real one."""
import os
import socket
import subprocess
import sys
import time
import urllib.request

from support.commands import ENV


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving a GGUF file, as a
    context manager: started on a free port, ready when ``/v1/models`` answers, always
    stopped (``.url`` is the chat-completions endpoint; ``.log`` its output)."""

    def __init__(self, gguf_path, log_path, alias="smollm2", n_ctx=2048, timeout=240):
        self.gguf_path, self.log_path, self.alias, self.n_ctx, self.timeout = gguf_path, log_path, alias, n_ctx, timeout
        self.port = free_port()
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def __enter__(self):
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf_path), "--model_alias", self.alias,
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", "1", "--n_threads_batch", "1"],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **ENV))
        log.close()
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: {self.tail()}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server not ready after {self.timeout} s: {self.tail()}")
                time.sleep(0.5)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return False

    def tail(self, n=2000):
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-n:]
