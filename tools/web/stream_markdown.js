// Markdown that is still arriving: closes what the text so far leaves open, so that a reply
// renders while it streams as it will once complete. An open code fence becomes a code block
// (not a literal "```python" line with "# comment" turned into a heading), open display math a
// math block, a half-written table's delimiter row a whole one; a trailing line that is only
// the start of a list item, a rule or a fence is held back until more arrives. Pure functions
// of the text: the chat renders with them and the browser tests check them.
"use strict";

const StrataStream = (() => {
  const FENCE = /^(\s*)(`{3,}|~{3,})(.*)$/;  // indented too: a fence inside a list item
  // A line that may yet become a list item, a rule, a setext underline or a fence.
  const UNFINISHED_LINE = /^ {0,3}([-*+_=]{1,2}|\d{1,9}[.)]?|`{1,2}|~{1,2})\s*$/;
  const TABLE_ROW = /^\s*\|?.*\|.*$/;
  const PARTIAL_DELIMITER = /^\s*\|?\s*:?-*:?\s*(\|\s*:?-*:?\s*)*\|?\s*$/;

  // Whether `line` closes the fence `open` ("```" or "~~~~", as opened).
  function closesFence(line, open) {
    const m = FENCE.exec(line);
    return !!m && m[2][0] === open[0] && m[2].length >= open.length && m[3].trim() === "";
  }

  // The cells of a table row: "| a | b |" -> 2.
  function cellCount(row) {
    const inner = row.trim().replace(/^\|/, "").replace(/\|$/, "");
    return inner.split(/(?<!\\)\|/).length;
  }

  // Display math delimiters ("$$") outside inline code on one line.
  function countDisplayMath(line) {
    return (line.replace(/`[^`]*`/g, "").match(/(?<!\\)\$\$/g) || []).length;
  }

  // {text, openCode, openMath}: `text` with its open blocks closed. `openCode`: the last code
  // block is still arriving (not to be highlighted yet); `openMath`: so is the last math block.
  function closeOpenBlocks(text) {
    const lines = text.split("\n");
    let fence = null, indent = "", mathOpen = false;
    for (const line of lines) {
      if (fence) {
        if (closesFence(line, fence)) fence = null;
        continue;
      }
      const m = FENCE.exec(line);
      if (m && !(m[2][0] === "`" && m[3].includes("`")) && !mathOpen) {
        fence = m[2];
        indent = m[1];
        continue;
      }
      if (countDisplayMath(line) % 2 === 1) mathOpen = !mathOpen;
    }
    const nl = text.endsWith("\n") ? "" : "\n";
    if (fence) return { text: `${text}${nl}${indent}${fence}`, openCode: true, openMath: false };
    if (mathOpen) return { text: `${text}${nl}$$`, openCode: false, openMath: true };
    const last = lines[lines.length - 1];
    if (lines.length > 1 || last !== "") {
      if (UNFINISHED_LINE.test(last)) lines.pop();
      else if (lines.length > 1 && PARTIAL_DELIMITER.test(last) && last.includes("-") && TABLE_ROW.test(lines[lines.length - 2]))
        lines[lines.length - 1] = `|${" --- |".repeat(cellCount(lines[lines.length - 2]))}`;
    }
    return { text: closeInline(lines.join("\n")), openCode: false, openMath: false };
  }

  // The last paragraph's open inline code and strong emphasis, closed.
  function closeInline(text) {
    const para = text.slice(text.lastIndexOf("\n\n") + 1);
    let out = text;
    const ticks = (para.match(/`/g) || []).length;
    if (ticks % 2 === 1 && !/`$/.test(para)) out += "`";
    const outsideCode = para.replace(/`[^`]*`?/g, "");
    if ((outsideCode.match(/\*\*/g) || []).length % 2 === 1 && !/\*\*\s*$/.test(outsideCode)) out += "**";
    return out;
  }

  return { closeOpenBlocks };
})();
