// The chat page: conversations kept in localStorage, replies streamed from
// /v1/chat/completions (server-sent events) and rendered as they arrive; stop, regenerate,
// edit a turn; tokens/s and prompt-cache hits per reply.
"use strict";

(() => {
  const STORE = "strata.conversations";
  const $ = (id) => document.getElementById(id);
  const { el } = Strata;

  let conversations = JSON.parse(localStorage.getItem(STORE) || "[]");
  let current = conversations[0] || null;
  let modelId = "";
  let running = null; // {controller} while a reply streams

  function save() {
    localStorage.setItem(STORE, JSON.stringify(conversations));
  }

  function newConversation() {
    current = { id: Date.now().toString(36), title: "New conversation", messages: [] };
    conversations.unshift(current);
    save();
    draw();
    $("prompt").focus();
  }

  function drawList() {
    const list = $("conversations");
    list.replaceChildren();
    for (const c of conversations) {
      const open = el("button", { class: "link", "aria-current": c === current ? "true" : null,
        onclick: () => { if (!running) { current = c; draw(); } } }, c.title);
      const del = el("button", { class: "link muted", title: "Delete", "aria-label": `Delete ${c.title}`,
        onclick: () => {
          if (running) return;
          conversations = conversations.filter((x) => x !== c);
          if (current === c) current = conversations[0] || null;
          save();
          draw();
        } }, "×");
      list.append(el("li", {}, open, del));
    }
  }

  function statsText(s) {
    if (!s) return "";
    const parts = [];
    if (s.tokens_per_s) parts.push(`${s.tokens_per_s.toFixed(1)} tokens/s`);
    if (s.completion_tokens !== undefined) parts.push(`${s.completion_tokens} tokens`);
    if (s.prompt_tokens !== undefined) parts.push(`prompt ${s.prompt_tokens} (${s.cached_tokens || 0} cached)`);
    if (s.stopped) parts.push("stopped");
    if (s.finish_reason && s.finish_reason !== "stop") parts.push(`finish: ${s.finish_reason}`);
    return parts.join(" · ");
  }

  function drawMessage(m, index) {
    const body = el("div", { class: "content" });
    if (m.role === "assistant") Strata.renderMarkdown(body, m.content);
    else body.textContent = m.content;
    const box = el("div", { class: `message ${m.role}`, "data-index": index }, el("div", { class: "role" }, m.role), body);
    if (m.role === "user") box.append(el("button", { class: "link edit", onclick: () => editTurn(index, box) }, "Edit"));
    if (m.error) box.append(el("div", { class: "error" }, m.error));
    if (m.stats) box.append(el("div", { class: "stats" }, statsText(m.stats)));
    return box;
  }

  function draw() {
    drawList();
    const box = $("messages");
    box.replaceChildren();
    if (!current) return;
    $("system").value = current.system || "";
    current.messages.forEach((m, i) => box.append(drawMessage(m, i)));
    box.scrollTop = box.scrollHeight;
  }

  function editTurn(index, box) {
    if (running) return;
    const area = el("textarea", { rows: 4, "aria-label": "Edit message" });
    area.value = current.messages[index].content;
    const commit = () => {
      current.messages[index].content = area.value;
      current.messages.length = index + 1;
      save();
      draw();
      reply();
    };
    area.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) (e.preventDefault(), commit());
      if (e.key === "Escape") draw();
    });
    box.querySelector(".content").replaceWith(area);
    box.querySelector(".edit").replaceWith(el("button", { class: "link", onclick: commit }, "Save and resend"));
    area.focus();
  }

  function requestBody() {
    const messages = [];
    if (current.system) messages.push({ role: "system", content: current.system });
    for (const m of current.messages) messages.push({ role: m.role, content: m.content });
    const body = {
      model: modelId || undefined,
      messages,
      stream: true,
      stream_options: { include_usage: true },
      temperature: Number($("temperature").value),
      top_p: Number($("top-p").value),
      max_tokens: Number($("max-tokens").value) || 512,
    };
    if ($("seed").value !== "") body.seed = Number($("seed").value);
    return body;
  }

  // Calls onEvent with each parsed `data:` object of a server-sent event stream.
  async function readEvents(res, onEvent) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") return;
          onEvent(JSON.parse(data));
        }
      }
    }
  }

  function setRunning(r) {
    running = r;
    $("send").hidden = !!r;
    $("stop").hidden = !r;
    $("regenerate").disabled = !!r;
    document.body.classList.toggle("streaming", !!r);
  }

  async function reply() {
    const conv = current;
    const msg = { role: "assistant", content: "", stats: {} };
    const body = requestBody();
    conv.messages.push(msg);
    draw();
    const view = $("messages").lastElementChild;
    const content = view.querySelector(".content");
    const stats = el("div", { class: "stats" });
    view.append(stats);
    const controller = new AbortController();
    setRunning({ controller });
    const started = performance.now();
    let firstAt = 0, chunks = 0, pending = false;
    const redraw = () => {
      pending = false;
      Strata.renderMarkdown(content, msg.content);
      $("messages").scrollTop = $("messages").scrollHeight;
    };
    try {
      const res = await Strata.api("/v1/chat/completions", { method: "POST", body: JSON.stringify(body), signal: controller.signal });
      if (!res.ok) throw new Error(await Strata.errorText(res));
      await readEvents(res, (ev) => {
        if (ev.error) throw new Error(ev.error.message || "the server reported an error");
        const choice = ev.choices && ev.choices[0];
        if (choice && choice.delta && choice.delta.content) {
          if (!firstAt) firstAt = performance.now();
          ++chunks;
          msg.content += choice.delta.content;
          if (!pending) (pending = true), requestAnimationFrame(redraw);
        }
        if (choice && choice.finish_reason) msg.stats.finish_reason = choice.finish_reason;
        if (ev.usage) {
          msg.stats.prompt_tokens = ev.usage.prompt_tokens;
          msg.stats.completion_tokens = ev.usage.completion_tokens;
          msg.stats.cached_tokens = (ev.usage.prompt_tokens_details || {}).cached_tokens || 0;
          const t = ev.usage.timings;
          if (t && t.decode_tokens_per_s) msg.stats.tokens_per_s = t.decode_tokens_per_s;
        }
        stats.textContent = statsText(msg.stats);
      });
    } catch (e) {
      if (e.name === "AbortError") msg.stats.stopped = true;
      else msg.error = e.message;
    }
    // Without the server's figure (a stopped reply has no usage), the rate seen here.
    if (!msg.stats.tokens_per_s && chunks > 1 && firstAt) msg.stats.tokens_per_s = ((chunks - 1) * 1000) / (performance.now() - firstAt);
    msg.stats.seconds = (performance.now() - started) / 1000;
    if (conv.title === "New conversation" && conv.messages.length) conv.title = conv.messages[0].content.slice(0, 40) || conv.title;
    setRunning(null);
    save();
    if (conv === current) draw();
  }

  function send() {
    const text = $("prompt").value.trim();
    if (!text || running) return;
    if (!current) newConversation();
    current.system = $("system").value;
    current.messages.push({ role: "user", content: text });
    $("prompt").value = "";
    save();
    reply();
  }

  function regenerate() {
    if (running || !current || !current.messages.length) return;
    while (current.messages.length && current.messages[current.messages.length - 1].role === "assistant") current.messages.pop();
    if (current.messages.length) reply();
  }

  function stop() {
    if (running) running.controller.abort();
  }

  function bindSlider(id) {
    const input = $(id), out = $(`${id}-out`);
    const show = () => (out.textContent = input.value);
    input.addEventListener("input", show);
    show();
  }

  async function loadModel() {
    const res = await Strata.api("/v1/models");
    if (!res.ok) return;
    const body = await res.json();
    modelId = body.data && body.data[0] ? body.data[0].id : "";
    $("model-name").textContent = modelId;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("composer").addEventListener("submit", (e) => (e.preventDefault(), send()));
    $("stop").addEventListener("click", stop);
    $("regenerate").addEventListener("click", regenerate);
    $("new-chat").addEventListener("click", () => !running && newConversation());
    $("system").addEventListener("change", () => {
      if (current) (current.system = $("system").value), save();
    });
    $("prompt").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) (e.preventDefault(), send());
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && running) (e.preventDefault(), stop());
      else if (e.altKey && e.key.toLowerCase() === "n") (e.preventDefault(), !running && newConversation());
      else if (e.altKey && e.key.toLowerCase() === "r") (e.preventDefault(), regenerate());
    });
    bindSlider("temperature");
    bindSlider("top-p");
    draw();
    $("prompt").focus();
    loadModel();
    StrataEngine.start($("engine-stats"), $("engine-placement"));
  });
})();
