# Chat templates for tests/dataload/prepare_reference.py and, for each, a renderer by hand that
# splits a conversation into (text, counted) segments: what the loss mask must cover, written
# independently of scripts/prepare_data.py (the test checks the segments join to the template's
# own rendering first).
#
# QWEN3 is the no-tools part of Qwen3's chat template (Qwen/Qwen3-8B tokenizer_config.json): the
# last assistant turn after the last user message gets an empty <think></think> block, earlier
# turns do not, so a turn renders differently alone than inside the whole conversation. LLAMA3 is
# Meta-Llama-3-Instruct's (content trimmed, <|eot_id|> ends a turn, BOS first). CHATML_GENERATION
# is ChatML with {% generation %} blocks (transformers' return_assistant_tokens_mask).

QWEN3 = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
          "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
          "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
          "{% endif %}")

CHATML_GENERATION = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}<|im_start|>assistant\n"
    "{% generation %}{{ m['content'] }}<|im_end|>\n{% endgeneration %}{% else %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

# special tokens each template needs in the tokenizer (beyond <|endoftext|>)
SPECIALS = {"qwen3": ["<|im_start|>", "<|im_end|>", "<think>", "</think>"],
            "llama3": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                       "<|eot_id|>"],
            "chatml_generation": ["<|im_start|>", "<|im_end|>"]}
TEMPLATES = {"qwen3": QWEN3, "llama3": LLAMA3, "chatml_generation": CHATML_GENERATION}


def segments_qwen3(msgs):
    out = []
    if msgs[0]["role"] == "system":
        out.append((f"<|im_start|>system\n{msgs[0]['content']}<|im_end|>\n", 0))
    users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    last_query = users[-1] if users else len(msgs) - 1
    for i, m in enumerate(msgs):
        c = m["content"]
        if m["role"] == "user" or (m["role"] == "system" and i > 0):
            out.append((f"<|im_start|>{m['role']}\n{c}<|im_end|>\n", 0))
        elif m["role"] == "assistant":
            if i > last_query and i == len(msgs) - 1:  # the reply being trained: a think block
                out.append(("<|im_start|>assistant\n<think>\n\n</think>\n\n", 0))
                out.append((c.lstrip("\n") + "<|im_end|>\n", 1))
            else:
                out.append(("<|im_start|>assistant\n", 0))
                out.append((c + "<|im_end|>\n", 1))
    return out


def segments_llama3(msgs):
    out = [("<|begin_of_text|>", 0)]
    for m in msgs:
        out.append((f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n", 0))
        asst = int(m["role"] == "assistant")
        # Jinja's trim strips whitespace like Python's str.strip()
        out.append((m["content"].strip(), asst))
        out.append(("<|eot_id|>", asst))
    return out


def segments_chatml_generation(msgs):
    out = []
    for m in msgs:
        if m["role"] == "assistant":
            out.append(("<|im_start|>assistant\n", 0))
            out.append((m["content"] + "<|im_end|>\n", 1))
        else:
            out.append((f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n", 0))
    return out


SEGMENTS = {"qwen3": segments_qwen3, "llama3": segments_llama3,
            "chatml_generation": segments_chatml_generation}


def expected_mask(segments, offsets):
    """0/1 per token (offsets: (start, end) characters of each token in the joined segments): 1
    when the token lies inside a counted segment. None when a token straddles a counted and an
    uncounted segment (the expectation would be ambiguous; the test's data avoids it)."""
    counted = []
    pos = 0
    for text, c in segments:
        counted.extend([c] * len(text))
        pos += len(text)
    mask = []
    for a, b in offsets:
        cs = set(counted[a:b]) if b > a else {counted[a] if a < len(counted) else 0}
        if len(cs) != 1:
            return None
        mask.append(cs.pop())
    return mask


def conversations(rng, words, n, padded=False):
    """Multi-turn conversations (1-3 replies, a system message or not) and corner cases: role
    names as content, equal messages, an empty reply, a conversation that ends with a user
    message, and (padded) replies with spaces around them (for a template that trims them:
    otherwise a token would straddle the header's newline and the reply)."""
    def say(k):
        return " ".join(rng.choice(words, k))
    out = []
    for j in range(n):
        msgs = [{"role": "system", "content": say(4)}] if j % 2 == 0 else []
        for _ in range(int(rng.integers(1, 4))):
            msgs.append({"role": "user", "content": say(6)})
            msgs.append({"role": "assistant", "content": say(8)})
        out.append(msgs)
    u, a = "user", "assistant"
    out.append([{"role": u, "content": "assistant"}, {"role": a, "content": "user"}])
    out.append([{"role": u, "content": "ok"}, {"role": a, "content": "ok"},
                {"role": u, "content": "ok"}, {"role": a, "content": "ok"}])
    out.append([{"role": u, "content": say(3)}, {"role": a, "content": ""},
                {"role": u, "content": say(3)}, {"role": a, "content": say(5)}])
    if padded:
        out.append([{"role": u, "content": say(3)}, {"role": a, "content": "  " + say(5) + " "},
                    {"role": u, "content": say(3)}, {"role": a, "content": say(2) + "  "}])
    out.append([{"role": u, "content": say(3)}, {"role": a, "content": say(5)},
                {"role": u, "content": say(4)}])
    return out
