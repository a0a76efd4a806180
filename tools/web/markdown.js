// Model output, which is untrusted, as HTML: Markdown through marked (raw HTML in a reply is
// shown as text; math kept as TeX), then DOMPurify; then, on elements made here, code blocks
// highlighted by highlight.js once they are closed, each with its language and a Copy button,
// and math typeset by KaTeX (loaded on first use). While a reply streams, what it leaves open
// is closed first (stream_markdown.js). Built without those libraries, replies are plain text.
"use strict";

const StrataMarkdown = (() => {
  const rich = typeof marked !== "undefined" && typeof DOMPurify !== "undefined";
  // Nothing in a reply may load anything or take input: only text-level Markdown survives.
  const PURIFY = {
    FORBID_TAGS: ["img", "style", "svg", "math", "form", "input", "button", "textarea", "select", "iframe", "object",
                  "embed", "video", "audio", "source", "picture", "link", "meta", "base", "dialog"],
    FORBID_ATTR: ["style", "srcset", "action", "formaction"],
    ALLOW_DATA_ATTR: false,
  };
  const CACHE_LIMIT = 500;  // highlighted blocks and typeset formulas kept for the next redraw

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  // $$...$$ and \[...\] as blocks; $...$ (not "$5 and $10": no space inside either dollar, no
  // digit after the closing one) and \(...\) inline. The TeX stays text until KaTeX sets it.
  const MATH_BLOCK = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[^\S\n]*(?:\n|$)/;
  const MATH_INLINE = /^(?:\$\$([^\n]+?)\$\$|\$(?!\s)((?:\\.|[^\\$\n])+?)(?<!\s)\$(?!\d)|\\\(([\s\S]+?)\\\))/;
  const mathExtensions = [
    {
      name: "mathBlock",
      level: "block",
      start(src) {  // only where a line begins: "$$" inside a paragraph is inline math
        const m = /(^|\n) {0,3}(?:\$\$|\\\[)/.exec(src);
        return m ? m.index + m[1].length : undefined;
      },
      tokenizer(src) {
        const m = MATH_BLOCK.exec(src);
        if (m) return { type: "mathBlock", raw: m[0], tex: (m[1] ?? m[2]).trim() };
      },
      renderer: (t) => `<div class="math math-display">${escapeHtml(t.tex)}</div>\n`,
    },
    {
      name: "mathInline",
      level: "inline",
      start: (src) => src.match(/\$|\\\(/)?.index,
      tokenizer(src) {
        const m = MATH_INLINE.exec(src);
        if (m) return { type: "mathInline", raw: m[0], tex: m[1] ?? m[2] ?? m[3], display: m[1] !== undefined };
      },
      renderer: (t) => `<span class="math ${t.display ? "math-display-inline" : "math-inline"}">${escapeHtml(t.tex)}</span>`,
    },
  ];

  if (rich) {
    // HTML a reply writes is shown as text, never parsed: only Markdown makes elements. (Even
    // DOMPurify's inert parse of `<img onerror>` trips the page's Content-Security-Policy.)
    marked.use({ renderer: { html: (html) => escapeHtml(html) }, extensions: mathExtensions });
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A") {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
  }
  // Debian's highlight.js 9 logs an end-of-life notice on first use; the page has taken note.
  if (typeof hljs !== "undefined") hljs.configure({ hideUpgradeWarningAcceptNoSupportOrSecurityUpdates: true });

  function remember(cache, key, make) {
    let value = cache.get(key);
    if (value === undefined) {
      value = make();
      if (cache.size >= CACHE_LIMIT) cache.clear();
      cache.set(key, value);
    }
    return value;
  }

  const highlighted = new Map();  // language + code -> highlighted HTML
  function highlight(code, lang) {
    if (typeof hljs === "undefined") return;
    const text = code.textContent;
    // highlight.js escapes the code: its output's only markup is its own spans.
    code.innerHTML = remember(highlighted, `${lang}\n${text}`, () =>
      lang && hljs.getLanguage(lang) ? hljs.highlight(lang, text, true).value : hljs.highlightAuto(text).value);
    code.classList.add("hljs");
  }

  // Each code block in a frame with its language and a Copy button; the block still arriving
  // (`openCode`: the last one) is left plain until it closes.
  function decorateCode(root, openCode) {
    const blocks = [...root.querySelectorAll("pre > code")];
    blocks.forEach((code, i) => {
      const pre = code.parentElement;
      const lang = (/\blanguage-([\w+#.-]+)/.exec(code.className) || [])[1] || "";
      const open = openCode && i === blocks.length - 1;
      if (open) pre.classList.add("streaming");
      else highlight(code, lang);
      const frame = Strata.el("div", { class: "code-block" });
      pre.replaceWith(frame);
      frame.append(Strata.el("div", { class: "code-bar" }, Strata.el("span", { class: "lang" }, lang || "text"),
        Strata.copyButton(() => code.textContent.replace(/\n$/, ""), "Copy code")), pre);
    });
  }

  let katexLoading = null;
  function loadKatex() {
    katexLoading ??= new Promise((resolve) => {
      const script = Strata.el("script", { src: "/static/katex.js" });
      script.addEventListener("load", resolve);
      script.addEventListener("error", resolve);
      document.head.append(script);
    });
    return katexLoading;
  }

  const typeset = new Map();  // mode + TeX -> KaTeX's element, cloned into each redraw
  // KaTeX builds its nodes itself (styles through the DOM, which the page's policy allows);
  // TeX it cannot parse stays as text, marked, with the reason in its title.
  function typesetMath(root) {
    const nodes = root.querySelectorAll(".math:not(.typeset):not(.pending):not(.math-error)");
    if (!nodes.length) return;
    if (typeof katex === "undefined") {
      loadKatex().then(() => typeof katex !== "undefined" && typesetMath(root));
      return;
    }
    for (const node of nodes) {
      const display = !node.classList.contains("math-inline");
      const made = remember(typeset, `${display}\n${node.textContent}`, () => {
        const box = document.createElement("span");
        try {
          katex.render(node.textContent, box, { displayMode: display, throwOnError: true });
          return box;
        } catch (e) {
          return e.message || "KaTeX cannot set this";
        }
      });
      if (typeof made === "string") {
        node.classList.add("math-error");
        node.title = made;
      } else {
        node.replaceChildren(...made.cloneNode(true).childNodes);
        node.classList.add("typeset");
      }
    }
  }

  // Renders untrusted Markdown into `el`; `streaming`: the text is a reply still arriving.
  function render(el, text, { streaming = false } = {}) {
    if (!rich) {
      el.textContent = text;
      el.classList.add("plain");
      return;
    }
    const closed = streaming ? StrataStream.closeOpenBlocks(text) : { text, openCode: false, openMath: false };
    el.innerHTML = DOMPurify.sanitize(marked.parse(closed.text, { headerIds: false, mangle: false }), PURIFY);
    decorateCode(el, closed.openCode);
    if (closed.openMath) [...el.querySelectorAll(".math-display")].pop()?.classList.add("pending");
    typesetMath(el);
  }

  return { render, rich };
})();
