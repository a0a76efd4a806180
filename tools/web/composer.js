// The message box's helpers: text files attached (chosen or dropped) go into the message as
// fenced code blocks named by the file, and a counter shows the message's tokens and the
// whole conversation's against the model's context, from the server's /tokenize and
// /apply-template (llama.cpp's endpoints), a moment after the typing stops.
"use strict";

const StrataComposer = (() => {
  const MAX_FILE_BYTES = 256 << 10;  // a request body is 1 MiB by default (serve --max-body)
  const COUNT_DELAY_MS = 250;
  const LANGUAGES = {
    py: "python", js: "javascript", mjs: "javascript", ts: "typescript", c: "c", h: "c", cc: "cpp", cpp: "cpp", hpp: "cpp",
    cu: "cpp", rs: "rust", go: "go", java: "java", kt: "kotlin", rb: "ruby", php: "php", sh: "bash", bash: "bash",
    json: "json", yaml: "yaml", yml: "yaml", toml: "ini", ini: "ini", md: "markdown", html: "html", css: "css",
    sql: "sql", xml: "xml", csv: "csv", txt: "", log: "", cmake: "cmake",
  };

  // A file's text as a fenced block: the fence longer than any run of backticks inside it.
  function fenced(name, text) {
    const ext = (/\.([^.]+)$/.exec(name) || [])[1] || "";
    const lang = LANGUAGES[ext.toLowerCase()] ?? "";
    const longest = Math.max(0, ...(text.match(/`+/g) || []).map((run) => run.length));
    const fence = "`".repeat(Math.max(3, longest + 1));
    return `${name}:\n${fence}${lang}\n${text.replace(/\n$/, "")}\n${fence}\n`;
  }

  // The text of a file, or an Error saying why it cannot be attached.
  async function readText(file) {
    if (file.size > MAX_FILE_BYTES)
      throw new Error(`${file.name} is ${Strata.formatBytes(file.size)}: attach text files of up to ${Strata.formatBytes(MAX_FILE_BYTES)}`);
    const bytes = new Uint8Array(await file.arrayBuffer());
    let text;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch (e) {
      text = null;
    }
    if (text === null || text.includes("\0"))
      throw new Error(`${file.name} is not a text file (not UTF-8 text): attach source, logs, Markdown, CSV and the like`);
    return text;
  }

  // Inserts each file at the cursor; the ones that cannot be read are named in `status`.
  async function attach(files, prompt, status) {
    const problems = [];
    let added = "";
    for (const file of files) {
      try {
        added += fenced(file.name, await readText(file));
      } catch (e) {
        problems.push(e.message);
      }
    }
    if (added) {
      const at = prompt.selectionStart ?? prompt.value.length;
      const before = prompt.value.slice(0, at), after = prompt.value.slice(at);
      prompt.value = `${before}${before && !before.endsWith("\n") ? "\n" : ""}${added}${after}`;
      prompt.dispatchEvent(new Event("input"));
    }
    status.textContent = problems.join("; ");
    status.className = problems.length ? "error" : "";
  }

  async function count(body) {
    const res = await Strata.api("/tokenize", { method: "POST", body: JSON.stringify(body) });
    if (!res.ok) throw new Error(await Strata.errorText(res));
    return (await res.json()).tokens.length;
  }

  // `context()` -> {messages (the conversation so far, with the system prompt), n_ctx, max_tokens,
  // model (whose tokenizer counts, where the server serves several)}.
  function tokenCounter(prompt, out, context) {
    let timer = 0, asked = 0;
    const refresh = async () => {
      const ask = ++asked;
      const { messages, n_ctx, max_tokens, model } = context();
      const draft = prompt.value;
      if (!draft && !messages.length) {
        out.textContent = "";
        return;
      }
      try {
        const own = draft ? await count({ model, content: draft }) : 0;
        const all = [...messages, ...(draft ? [{ role: "user", content: draft }] : [])];
        let total = 0;
        if (all.length) {
          const res = await Strata.api("/apply-template", { method: "POST", body: JSON.stringify({ model, messages: all }) });
          if (!res.ok) throw new Error(await Strata.errorText(res));
          total = await count({ model, content: (await res.json()).prompt, parse_special: true });
        }
        if (ask !== asked) return;  // a later count is on its way
        const fits = !n_ctx || total + max_tokens <= n_ctx;
        out.textContent = `${own} tokens · conversation ${total}${n_ctx ? ` of ${n_ctx}` : ""}` +
          (fits ? "" : ` (with ${max_tokens} more the reply may be cut at the context)`);
        out.dataset.tokens = own;
        out.dataset.total = total;
        out.className = fits ? "muted" : "error";
      } catch (e) {
        if (ask === asked) (out.textContent = `tokens: ${e.message}`), (out.className = "error");
      }
    };
    const schedule = () => {
      clearTimeout(timer);
      timer = setTimeout(refresh, COUNT_DELAY_MS);
    };
    prompt.addEventListener("input", schedule);
    return schedule;
  }

  return { attach, fenced, tokenCounter };
})();
