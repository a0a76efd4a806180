// Shared by the chat and planner pages: the API key, requests to this server, a plan's
// placement per layer, and rendering model output, which is untrusted: Markdown through marked, then DOMPurify, then highlight.js
// on code blocks. Built without those libraries, replies are shown as plain text.
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

  const rich = typeof marked !== "undefined" && typeof DOMPurify !== "undefined";
  // Nothing in a reply may load anything or take input: only text-level Markdown survives.
  const PURIFY = {
    FORBID_TAGS: ["img", "style", "svg", "math", "form", "input", "button", "textarea", "select", "iframe", "object",
                  "embed", "video", "audio", "source", "picture", "link", "meta", "base", "dialog"],
    FORBID_ATTR: ["style", "srcset", "action", "formaction"],
    ALLOW_DATA_ATTR: false,
  };
  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  if (rich) {
    // HTML a reply writes is shown as text, never parsed: only Markdown makes elements. (Even
    // DOMPurify's inert parse of `<img onerror>` trips the page's Content-Security-Policy.)
    marked.use({ renderer: { html: (html) => escapeHtml(html) } });
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A") {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
  }

  // Renders untrusted Markdown into `el`.
  function renderMarkdown(el, text) {
    if (!rich) {
      el.textContent = text;
      el.classList.add("plain");
      return;
    }
    el.innerHTML = DOMPurify.sanitize(marked.parse(text, { headerIds: false, mangle: false }), PURIFY);
    if (typeof hljs !== "undefined") el.querySelectorAll("pre code").forEach((block) => hljs.highlightBlock(block));
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

  return { api, errorText, renderMarkdown, rich, el, svg, formatBytes, formatSeconds, askKey, drawPlacement, placementLegend };
})();
