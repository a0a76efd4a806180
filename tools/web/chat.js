// The chat page: conversations, settings and the chosen model kept in the browser's storage
// (chat_store.js), replies streamed from /v1/chat/completions (server-sent events) and rendered
// as they arrive; stop, regenerate, edit a turn, copy a message; tokens/s and prompt-cache hits
// per reply; a model picker when the server serves several; export and import as `strata
// chat`'s /save files; attachments and a token counter (composer.js).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const { el } = Strata;

  let conversations = StrataStore.conversations();
  let current = conversations[0] || null;
  let models = [];   // /v1/models' data
  let running = null; // {controller} while a reply streams
  let countTokens = () => {};

  const save = () => StrataStore.saveConversations(conversations);
  const modelId = () => $("model-picker").value || (models[0] ? models[0].id : "");

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
        onclick: () => { if (!running) { current = c; draw(); Strata.closeSidebar(); } } }, c.title);
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

  // A reasoning model's reasoning, apart from its answer (the server's reasoning_content), folded
  // above it as plain text; made when the first of it arrives.
  function showReasoning(box, text) {
    if (!text) return;
    let details = box.querySelector("details.reasoning");
    if (!details) {
      details = el("details", { class: "reasoning" }, el("summary", {}, "Reasoning"), el("div", { class: "thoughts" }));
      box.insertBefore(details, box.querySelector(".content"));
    }
    details.querySelector(".thoughts").textContent = text;
  }

  function drawMessage(m, index) {
    const body = el("div", { class: "content" });
    if (m.role === "assistant") StrataMarkdown.render(body, m.content);
    else body.textContent = m.content;
    const actions = el("span", { class: "actions" }, Strata.copyButton(() => m.content));
    if (m.role === "user") actions.append(el("button", { type: "button", class: "link edit", onclick: () => editTurn(index, box) }, "Edit"));
    const box = el("div", { class: `message ${m.role}`, "data-index": index }, el("div", { class: "role" }, m.role, actions), body);
    showReasoning(box, m.reasoning);
    if (m.error) box.append(el("div", { class: "error" }, m.error));
    if (m.stats) box.append(el("div", { class: "stats" }, statsText(m.stats)));
    return box;
  }

  function draw() {
    drawList();
    const box = $("messages");
    box.replaceChildren();
    $("system").value = current ? current.system || "" : "";
    if (current) current.messages.forEach((m, i) => box.append(drawMessage(m, i)));
    box.scrollTop = box.scrollHeight;
    countTokens();
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
    box.querySelector(".edit").replaceWith(el("button", { type: "button", class: "link", onclick: commit }, "Save and resend"));
    area.focus();
  }

  // The conversation as the model reads it: the system prompt, then the turns.
  function chatMessages(conv) {
    return [...(conv && conv.system ? [{ role: "system", content: conv.system }] : []),
      ...(conv ? conv.messages.map((m) => ({ role: m.role, content: m.content })) : [])];
  }

  function requestBody() {
    const body = {
      model: modelId() || undefined,
      messages: chatMessages(current),
      stream: true,
      stream_options: { include_usage: true },
      temperature: Number($("temperature").value),
      top_p: Number($("top-p").value),
    };
    // A max_tokens past the context's end is refused by the server; without one the reply runs
    // to the context's end, as the token counter says it may.
    const maxTokens = Number($("max-tokens").value) || 512, nCtx = contextSize();
    const total = Number($("token-count").dataset.total || 0);
    if (!nCtx || total + maxTokens <= nCtx) body.max_tokens = maxTokens;
    if ($("seed").value !== "") body.seed = Number($("seed").value);
    return body;
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
      showReasoning(view, msg.reasoning);
      if (running) StrataMarkdown.render(content, msg.content, { streaming: true });
      $("messages").scrollTop = $("messages").scrollHeight;
    };
    try {
      const res = await Strata.api("/v1/chat/completions", { method: "POST", body: JSON.stringify(body), signal: controller.signal });
      if (!res.ok) throw new Error(await Strata.errorText(res));
      await Strata.readEvents(res, (ev) => {
        if (ev.error) throw new Error(ev.error.message || "the server reported an error");
        const choice = ev.choices && ev.choices[0];
        const delta = choice && choice.delta;
        if (delta && (delta.content || delta.reasoning_content)) {
          if (!firstAt) firstAt = performance.now();
          ++chunks;
          msg.content += delta.content || "";
          if (delta.reasoning_content) msg.reasoning = (msg.reasoning || "") + delta.reasoning_content;
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

  function status(text, isError) {
    $("store-status").textContent = text;
    $("store-status").className = isError ? "error" : "muted";
  }

  function exportConversation() {
    if (!current || !current.messages.length) return status("Nothing to export: this conversation is empty.", true);
    const blob = new Blob([JSON.stringify(StrataStore.toSaved(current), null, 2) + "\n"], { type: "application/json" });
    const link = el("a", { href: URL.createObjectURL(blob), download: StrataStore.fileName(current) });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    status(`Exported as ${link.download}: open it with strata chat --load FILE.`, false);
  }

  async function importConversation(file) {
    try {
      const conv = StrataStore.fromSaved(await file.text(), file.name);
      conversations.unshift(conv);
      current = conv;
      save();
      draw();
      status(`Imported ${file.name}: ${conv.messages.length} messages.`, false);
    } catch (e) {
      status(e.message, true);
    }
  }

  // Settings survive a reload: each control's value, saved as it changes.
  const SETTINGS = { temperature: "temperature", top_p: "top-p", max_tokens: "max-tokens", seed: "seed" };
  function keepSettings() {
    const saved = StrataStore.settings();
    for (const [key, id] of Object.entries(SETTINGS)) {
      if (saved[key] !== undefined) $(id).value = saved[key];
      $(id).addEventListener("input", () => {
        StrataStore.saveSettings(Object.fromEntries(Object.entries(SETTINGS).map(([k, i]) => [k, $(i).value])));
        countTokens();
      });
    }
  }

  function bindSlider(id) {
    const input = $(id), out = $(`${id}-out`);
    const show = () => (out.textContent = input.value);
    input.addEventListener("input", show);
    show();
  }

  // One model: its name. Several: a picker, the choice kept for the next visit.
  async function loadModels() {
    const res = await Strata.api("/v1/models");
    if (!res.ok) return;
    models = (await res.json()).data || [];
    const picker = $("model-picker");
    const kept = StrataStore.model();
    picker.replaceChildren(...models.map((m) => el("option", { value: m.id, selected: m.id === kept }, m.id)));
    $("model-choice").hidden = models.length < 2;
    $("model-name").textContent = models.length === 1 ? models[0].id : "";
    countTokens();
  }

  function contextSize() {
    const m = models.find((x) => x.id === modelId());
    return m && m.meta ? m.meta.n_ctx : 0;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("composer").addEventListener("submit", (e) => (e.preventDefault(), send()));
    $("stop").addEventListener("click", stop);
    $("regenerate").addEventListener("click", regenerate);
    $("new-chat").addEventListener("click", () => !running && (newConversation(), Strata.closeSidebar()));
    $("export").addEventListener("click", exportConversation);
    $("import").addEventListener("change", (e) => e.target.files[0] && importConversation(e.target.files[0]).then(() => (e.target.value = "")));
    $("attach").addEventListener("change", (e) => StrataComposer.attach([...e.target.files], $("prompt"), $("composer-status")).then(() => (e.target.value = "")));
    $("composer").addEventListener("dragover", (e) => e.preventDefault());
    $("composer").addEventListener("drop", (e) => {
      e.preventDefault();
      StrataComposer.attach([...e.dataTransfer.files], $("prompt"), $("composer-status"));
    });
    $("model-picker").addEventListener("change", () => (StrataStore.saveModel($("model-picker").value), countTokens()));
    $("system").addEventListener("change", () => {
      if (current) (current.system = $("system").value), save();
      countTokens();
    });
    $("prompt").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) (e.preventDefault(), send());
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && running) (e.preventDefault(), stop());
      else if (e.altKey && e.key.toLowerCase() === "n") (e.preventDefault(), !running && newConversation());
      else if (e.altKey && e.key.toLowerCase() === "r") (e.preventDefault(), regenerate());
    });
    keepSettings();
    bindSlider("temperature");
    bindSlider("top-p");
    countTokens = StrataComposer.tokenCounter($("prompt"), $("token-count"), () => ({
      messages: chatMessages(current), n_ctx: contextSize(), max_tokens: Number($("max-tokens").value) || 512, model: modelId() || undefined }));
    draw();
    $("prompt").focus();
    loadModels();
    StrataEngine.start($("engine-stats"), $("engine-placement"));
  });
})();
