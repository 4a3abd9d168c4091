#!/usr/bin/env python3
"""A stand-in for OpenAI's Files and Batches endpoints, on loopback, for the tests of
`backend = "openai-batch"`. It is not OpenAI: it implements the documented surface doc2ci uses
(POST /v1/files multipart with purpose=batch, POST /v1/batches, GET /v1/batches/{id},
GET /v1/batches?limit&after, GET /v1/files/{id}/content) with the documented objects, status
sequence (validating -> in_progress -> finalizing -> completed) and output/error file lines.

Answers are deterministic: each request gets a small workflow naming its custom_id. Partial
failures on purpose: every request whose custom_id's CRC32 % FAIL_EVERY == 0 fails, alternately as
a non-200 line in the output file and as a line in the error file. GET /stats counts what was asked.

usage: batch_server.py [--key KEY] [--seconds S] [--fail-every N]   (prints "listening on PORT")
"""
import argparse
import email.parser
import email.policy
import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
FILES = {}  # id -> (purpose, bytes, filename)
BATCHES = {}  # id -> dict
ORDER = []  # batch ids, oldest first
STATS = {"files_uploaded": 0, "batches_created": 0, "lines_submitted": 0, "polls": 0}


def now():
    return int(time.time())


def answer(custom_id, body):
    text = f"on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo {custom_id}\n"
    prompt = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
    return {
        "id": f"chatcmpl-{zlib.crc32(custom_id.encode()):08x}",
        "object": "chat.completion",
        "created": now(),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 24, "total_tokens": prompt + 24},
    }


def finish(b):
    """Runs the batch's lines once: the output and error files."""
    out, err = [], []
    for n, line in enumerate(FILES[b["input_file_id"]][1].decode().splitlines()):
        if not line.strip():
            continue
        req = json.loads(line)
        cid = req["custom_id"]
        rid = f"batch_req_{b['id']}_{n}"
        crc = zlib.crc32(cid.encode())
        if ARGS.fail_every and crc % ARGS.fail_every == 0:
            if (crc // ARGS.fail_every) % 2 == 0:
                body = {"error": {"message": "This model's maximum context length is exceeded.", "type": "invalid_request_error"}}
                out.append({"id": rid, "custom_id": cid, "response": {"status_code": 400, "request_id": rid, "body": body}, "error": None})
            else:
                err.append({"id": rid, "custom_id": cid, "response": None, "error": {"code": "server_error", "message": "The request could not be processed."}})
            b["request_counts"]["failed"] += 1
        else:
            out.append({"id": rid, "custom_id": cid, "response": {"status_code": 200, "request_id": rid, "body": answer(cid, req["body"])}, "error": None})
            b["request_counts"]["completed"] += 1
    for kind, lines in (("output_file_id", out), ("error_file_id", err)):
        if lines:
            fid = f"file-{kind[:3]}{b['id'][6:]}"
            FILES[fid] = ("batch_output", "".join(json.dumps(l) + "\n" for l in lines).encode(), f"{kind}.jsonl")
            b[kind] = fid


def advance(b):
    age = time.time() - b["_t"]
    if b["status"] in ("completed", "failed", "expired", "cancelled"):
        return
    if age < 0.2:
        b["status"] = "validating"
    elif age < ARGS.seconds:
        b["status"] = "in_progress"
        b["in_progress_at"] = b["in_progress_at"] or now()
    else:
        finish(b)
        b["status"] = "completed"
        b["finalizing_at"] = b["completed_at"] = now()


def public(b):
    return {k: v for k, v in b.items() if not k.startswith("_")}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, obj=None, raw=None, ctype="application/json"):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def authorised(self):
        if ARGS.key and self.headers.get("Authorization") != f"Bearer {ARGS.key}":
            self.reply(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}})
            return False
        return True

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self):
        data = self.body()
        if not self.authorised():
            return
        with LOCK:
            if self.path == "/v1/files":
                head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + data)
                fields = {p.get_param("name", header="content-disposition"): p for p in msg.iter_parts()}
                if "file" not in fields or fields.get("purpose") is None:
                    return self.reply(400, {"error": {"message": "file and purpose are required"}})
                purpose = fields["purpose"].get_content().strip()
                content = fields["file"].get_payload(decode=True)
                fid = f"file-{len(FILES) + 1:06d}"
                FILES[fid] = (purpose, content, fields["file"].get_filename())
                STATS["files_uploaded"] += 1
                return self.reply(200, {"id": fid, "object": "file", "bytes": len(content), "created_at": now(),
                                        "filename": fields["file"].get_filename(), "purpose": purpose})
            if self.path == "/v1/batches":
                req = json.loads(data)
                f = FILES.get(req.get("input_file_id"))
                if f is None or f[0] != "batch":
                    return self.reply(400, {"error": {"message": "input_file_id is not a batch file"}})
                if req.get("endpoint") != "/v1/chat/completions" or req.get("completion_window") != "24h":
                    return self.reply(400, {"error": {"message": "unsupported endpoint or completion_window"}})
                bid = f"batch_{len(BATCHES) + 1:06d}"
                lines = [l for l in f[1].decode().splitlines() if l.strip()]
                b = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "errors": None,
                     "input_file_id": req["input_file_id"], "completion_window": "24h", "status": "validating",
                     "output_file_id": None, "error_file_id": None, "created_at": now(), "in_progress_at": None,
                     "expires_at": now() + 86400, "finalizing_at": None, "completed_at": None,
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                     "metadata": req.get("metadata") or {}, "_t": time.time()}
                BATCHES[bid] = b
                ORDER.append(bid)
                STATS["batches_created"] += 1
                STATS["lines_submitted"] += len(lines)
                return self.reply(200, public(b))
        self.reply(404, {"error": {"message": f"no route {self.path}"}})

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                return self.reply(200, STATS)
        if not self.authorised():
            return
        with LOCK:
            path, _, query = self.path.partition("?")
            if path == "/v1/batches":
                q = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv)
                ids = list(reversed(ORDER))
                if "after" in q and q["after"] in ids:
                    ids = ids[ids.index(q["after"]) + 1:]
                limit = int(q.get("limit", 20))
                page = ids[:limit]
                for i in page:
                    advance(BATCHES[i])
                return self.reply(200, {"object": "list", "data": [public(BATCHES[i]) for i in page],
                                        "first_id": page[0] if page else None, "last_id": page[-1] if page else None,
                                        "has_more": len(ids) > limit})
            if path.startswith("/v1/batches/"):
                b = BATCHES.get(path.rsplit("/", 1)[1])
                if b is None:
                    return self.reply(404, {"error": {"message": "No batch found"}})
                STATS["polls"] += 1
                advance(b)
                return self.reply(200, public(b))
            if path.startswith("/v1/files/") and path.endswith("/content"):
                f = FILES.get(path.split("/")[3])
                if f is None:
                    return self.reply(404, {"error": {"message": "No such file"}})
                return self.reply(200, raw=f[1], ctype="application/jsonl")
        self.reply(404, {"error": {"message": f"no route {self.path}"}})


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--key", default=None)
    p.add_argument("--seconds", type=float, default=1.0, help="time a batch spends in progress")
    p.add_argument("--fail-every", type=int, default=0)
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    print(f"listening on {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
