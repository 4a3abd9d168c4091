"""Reference token ids and greedy tokens from llama.cpp (its own server, the `xllamacpp` peer) for SmolLM2-135M-Instruct.

Run: python3 -m peers.smollm_reference [gguf] > libs/smollm/tests/data/llamacpp_reference.json
(the peer is installed by scripts/deps.sh; it was first made with llama-cpp-python 0.3.36 in-process, and
llama.cpp's server gives the same ids and greedy tokens). The GGUF defaults to
$DOC2CI_ASSETS (or ~/.cache/doc2ci/assets)/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf.
"""
import json, os, sys
from pathlib import Path

from peers import llama_server  # the repository's launcher of llama.cpp's server
import xllamacpp as xlc  # noqa: E402

assets = os.environ.get("DOC2CI_ASSETS") or os.path.expanduser("~/.cache/doc2ci/assets")
gguf = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    assets, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
GREEDY = 64

server = llama_server.start(gguf, threads=2)


def post(path, body):
    return llama_server.post(server, path, body)


def tokenize(text):
    return post("/tokenize", {"content": text, "add_special": False, "parse_special": True})["tokens"]


strings = [
    "Hello world",
    "The year 2024 had 365 days; pi is 3.14159.",
    "  leading spaces\n\ttabs and\r\nCRLF   trailing  ",
    "I'm sure they're done, aren't they? We'll see.",
    "naïve café — 日本語 🚀 Ünïcödé",
    "jobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n",
    "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
    "x=1+2*3/4-5 (a[0]){b} 0x1F 1,000,000.00",
]
tokenized = [{"text": s, "ids": tokenize(s)} for s in strings]

# The study's zero-shot prompt (SPEC §4) on a real GitHub Actions section (llm4ci data, CC BY 4.0).
system = "You are a highly skilled software developer and DevOps engineer."
task = ("Given the description below, generate a minimal and single valid GitHub Actions YAML configuration. "
        "Do not provide any reasoning. Only output the single YAML configuration, with no comments, markdown, or "
        "extra formatting. The YAML must match the described task exactly. Do not add any unneeded directives unless told.")
title = "About workflows - Advanced workflow features - Creating dependent jobs"
description = ("This section briefly describes some of the advanced features of GitHub Actions that help you create "
               "more complex workflows. By default, the jobs in your workflow all run in parallel at the same time. "
               "If you have a job that must only run after another job has completed, you can use the needs keyword "
               "to create this dependency. If one of the jobs fails, all dependent jobs are skipped; however, if you "
               "need the jobs to continue, you can define this using the if conditional statement.")
messages = [{"role": "system", "content": system}, {"role": "user", "content": f"{task}\n\n{title}: {description}"}]
no_system = [{"role": "user", "content": "What is 2+2?"}]


def greedy(msgs):
    prompt = post("/apply-template", {"messages": msgs})["prompt"]
    ids = tokenize(prompt)
    r = post("/completion", {"prompt": ids, "n_predict": GREEDY, "temperature": 0.0, "top_k": 1, "top_p": 1.0,
                             "min_p": 0.0, "repeat_penalty": 1.0, "return_tokens": True, "cache_prompt": False})
    out = r["tokens"][:GREEDY]
    if r.get("stop_type") == "eos":
        out = out[:-1]  # the end-of-generation token itself is not part of the answer
    text = post("/detokenize", {"tokens": out})["content"]
    return {"messages": msgs, "prompt": prompt, "prompt_ids": ids, "greedy_ids": out, "greedy_text": text}


# Chat templates in the dialects of the open models' own (written here, not copied), each rendered by
# llama.cpp's Jinja engine on this GGUF's vocabulary: attribute and item access, a default system
# prompt, filters inside `+`, whitespace control, trim_blocks/lstrip_blocks, namespaces, Python's
# string methods, and `bos_token` written by the template (Hermes and Llama 3 style).
TEMPLATES = {
    "qwen2.5-style": (
        "{%- if tools %}\n    {{- '<|im_start|>system\\nTools<|im_end|>\\n' }}\n{%- else %}\n"
        "    {%- if messages[0]['role'] == 'system' %}\n"
        "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
        "    {%- else %}\n        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}\n"
        "    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
        "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
        "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
        "    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"),
    "hermes-style": (
        "{{bos_token}}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    "llama3-style": (
        "{{- bos_token }}\n{%- for message in messages %}\n    {{- '<|start_header_id|>' + message['role'] + "
        "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}\n{%- endfor %}\n"
        "{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"),
    "zephyr-style": (
        "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
        "{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n{% endif %}\n"
        "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"),
    "namespace-style": (
        "{% set ns = namespace(system='') %}{% for m in messages %}{% if m.role == 'system' %}"
        "{% set ns.system = m.content.strip() %}{% endif %}{% endfor %}"
        "{% if ns.system %}<<SYS>>{{ ns.system | upper }}<</SYS>>\n{% endif %}"
        "{% for m in messages if m.role != 'system' %}{% if m.content.startswith(' ') %}[sp]{% endif %}"
        "[{{ loop.index }}/{{ messages | length }}] {{ m.content.strip() }}\n{% endfor %}"
        "{% if add_generation_prompt %}{{ eos_token }}{% endif %}"),
}
conversations = [messages, no_system, [{"role": "system", "content": "  Be brief.  "},
                                       {"role": "user", "content": "  Hello,\n  world!  "}]]


def rendered(name, source):
    srv = llama_server.start(gguf, threads=1, template=source)
    props = llama_server.get(srv, "/props")
    chats = []
    for msgs in conversations:
        prompt = llama_server.post(srv, "/apply-template", {"messages": msgs})["prompt"]
        ids = llama_server.post(srv, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
        chats.append({"messages": msgs, "prompt": prompt, "prompt_ids": ids})
    del srv
    return {"name": name, "source": source, "bos_token": props["bos_token"], "eos_token": props["eos_token"],
            "chats": chats}


json.dump({"peer": f"llama.cpp server (xllamacpp {xlc.__version__})", "gguf": os.path.basename(gguf),
           "tokenized": tokenized, "chats": [greedy(messages), greedy(no_system)],
           "templates": [rendered(n, t) for n, t in TEMPLATES.items()]},
          sys.stdout, ensure_ascii=False, indent=1)
sys.stdout.write("\n")
