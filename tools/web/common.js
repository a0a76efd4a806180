// Shared by the chat and planner pages: the API key, requests to this server and the
// server-sent events they answer with, elements made without innerHTML, copying to the
// clipboard, and a plan's placement per layer.
"use strict";

const Strata = (() => {
  const KEY_STORE = "strata.apiKey";

  function apiKey() {
    return localStorage.getItem(KEY_STORE) || "";
  }

  let asking = null; // the open dialog's answer: requests refused together ask once

  // The API key, asked for once and remembered.
  function askKey(message) {
    if (!asking) asking = showKeyDialog(message).finally(() => (asking = null));
    return asking;
  }

  // The dialog, made on first use: <dialog><form method=dialog> key field, Save, Cancel.
  function keyDialog() {
    let dialog = document.getElementById("key-dialog");
    if (dialog) return dialog;
    dialog = el("dialog", { id: "key-dialog" },
      el("form", { method: "dialog" },
        el("p", { class: "key-message" }),
        el("label", {}, "API key ", el("input", { type: "password", autocomplete: "off" })),
        el("button", { value: "ok" }, "Save"), " ", el("button", { value: "cancel" }, "Cancel")));
    document.body.append(dialog);
    return dialog;
  }

  function showKeyDialog(message) {
    const dialog = keyDialog();
    const input = dialog.querySelector("input");
    dialog.querySelector(".key-message").textContent = message;
    input.value = "";
    return new Promise((resolve) => {
      dialog.onclose = () => {
        if (dialog.returnValue === "ok" && input.value) localStorage.setItem(KEY_STORE, input.value.trim());
        resolve(dialog.returnValue === "ok");
      };
      dialog.showModal();
      input.focus();
    });
  }

  // fetch() on this server with the key; on 401 asks for the key once and retries.
  async function api(path, options = {}) {
    for (let attempt = 0; ; ++attempt) {
      const headers = Object.assign({}, options.headers || {});
      if (apiKey()) headers["Authorization"] = "Bearer " + apiKey();
      if (options.body !== undefined) headers["Content-Type"] = "application/json";
      const res = await fetch(path, Object.assign({}, options, { headers }));
      if (res.status !== 401 || attempt > 0) return res;
      const msg = apiKey() ? "The server refused the saved API key." : "This server needs an API key (strata serve --api-key).";
      if (!(await askKey(msg))) return res;
    }
  }

  // The message of an OpenAI-shaped error body, or the status line.
  async function errorText(res) {
    try {
      const body = await res.json();
      if (body && body.error && body.error.message) return body.error.message;
    } catch (e) {
      // not JSON: fall through to the status
    }
    return `HTTP ${res.status} ${res.statusText}`;
  }

  // Calls onEvent with each parsed `data:` object of a server-sent event stream (a fetch
  // Response: EventSource cannot send the API key); returns at its end or at "[DONE]".
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

  // Puts `text` on the clipboard: the Clipboard API, else (no permission, not a secure
  // context) a hidden text area and the copy command. Resolves to whether it worked.
  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (e) {
      const area = el("textarea", { class: "offscreen", "aria-hidden": "true" });
      area.value = text;
      document.body.append(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      return ok;
    }
  }

  // A button that copies what `text()` returns and says so for a moment.
  function copyButton(text, label = "Copy") {
    const button = el("button", { type: "button", class: "link copy", title: label });
    button.textContent = label;
    button.addEventListener("click", async () => {
      const ok = await copyText(text());
      button.textContent = ok ? "Copied" : "Copy failed";
      button.dataset.copied = ok ? "yes" : "no";
      setTimeout(() => (button.textContent = label), 1500);
    });
    return button;
  }

  // Elements without innerHTML: el("div", {class: "x"}, "text", child, ...).
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== undefined && c !== null) node.append(c);
    return node;
  }

  function formatBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) (n /= 1024), ++i;
    return `${n < 10 && i > 0 ? n.toFixed(1) : Math.round(n)} ${units[i]}`;
  }

  function formatSeconds(s) {
    if (s < 1e-3) return `${(s * 1e6).toFixed(0)} µs`;
    if (s < 1) return `${(s * 1e3).toFixed(s < 0.01 ? 2 : 1)} ms`;
    return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  }

  function svg(tag, attrs = {}, ...children) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    for (const c of children) node.append(c);
    return node;
  }

  // Where a layer's bytes live, coloured as the plan SVG's lanes (planner/plan_svg.cpp).
  const PLACE_COLORS = {
    gpu: "#3182bd", "dram->gpu": "#fdae6b", "dram(cpu)": "#74c476", "nvme->gpu": "#8c6bb1", "nvme(cpu)": "#bcbddc",
    dram: "#9ecae1", nvme: "#8c6bb1", "act:gpu": "#6baed6", "act:dram": "#c6dbef", "act:nvme": "#dadaeb", cpu: "#74c476",
  };
  const PLACE_LEGEND = [["gpu", "GPU memory"], ["dram->gpu", "DRAM, copied to the GPU"], ["dram(cpu)", "DRAM, CPU computes"],
    ["nvme->gpu", "NVMe, streamed to the GPU"], ["nvme(cpu)", "NVMe, CPU computes"], ["dram", "KV in DRAM"],
    ["act:gpu", "KV recomputed from activations"]];

  function placementLegend() {
    return PLACE_LEGEND.map(([k, label]) =>
      el("span", {}, svg("svg", { width: 12, height: 12 }, svg("rect", { width: 12, height: 12, fill: PLACE_COLORS[k] })), ` ${label}`));
  }

  // A plan's layers (Plan::to_json) as three strips, weights, KV cache and attention, one bar
  // per layer, within `width` pixels.
  function drawPlacement(plan, width) {
    const n = plan.layers.length;
    const left = 80, h = 22;
    const w = Math.max(2, Math.min(24, (width - left - 10) / Math.max(n, 1)));
    const rows = [["weights", (l) => l.weights], ["KV cache", (l) => l.kv], ["attention", (l) => l.attention]];
    const box = svg("svg", { width: left + n * w + 10, height: rows.length * (h + 4) + 24, role: "img",
      "aria-label": `placement of ${n} layers` });
    rows.forEach(([name, pick], row) => {
      const y = row * (h + 4);
      box.append(svg("text", { x: 0, y: y + h * 0.7 }, name));
      plan.layers.forEach((l, i) => {
        const where = pick(l);
        box.append(svg("rect", { x: left + i * w, y, width: Math.max(w - 0.5, 1), height: h, fill: PLACE_COLORS[where] || "#ccc",
          "data-layer": l.layer, "data-where": where }, svg("title", {}, `layer ${l.layer} ${name}: ${where}`)));
      });
    });
    const y = rows.length * (h + 4) + 14;
    for (let i = 0; i < n; i += Math.max(1, Math.ceil(n / (width / 90))))
      box.append(svg("text", { x: left + i * w, y, "font-size": 10 }, String(i)));
    return box;
  }

  // Below 700 px the side column is a drawer (strata.css): the header's menu button opens it.
  function closeSidebar() {
    document.body.classList.remove("sidebar-open");
    document.getElementById("menu")?.setAttribute("aria-expanded", "false");
  }
  document.addEventListener("DOMContentLoaded", () => {
    const menu = document.getElementById("menu");
    if (!menu) return;
    menu.addEventListener("click", () => menu.setAttribute("aria-expanded", String(document.body.classList.toggle("sidebar-open"))));
    document.querySelector("main")?.addEventListener("click", closeSidebar);
    document.addEventListener("keydown", (e) => e.key === "Escape" && closeSidebar());
  });

  return { api, errorText, closeSidebar, readEvents, copyText, copyButton, el, svg, formatBytes, formatSeconds, askKey, drawPlacement,
           placementLegend, PLACE_COLORS };
})();
