#!/usr/bin/env python3
"""Pre-tokenizer split fixtures for tests/unit/models/test_tokenizer.cpp: how the regex lists llama.cpp
uses for the "deepseek-llm" (DeepSeek-V2), "deepseek-v3" and "gpt-4o" (o200k: gpt-oss) BPE
pre-tokenizers (src/llama-vocab.cpp, copied below as llama.cpp writes them) split each string of
tests/fixtures/tokenizer_corpus.jsonl and a few more, as evaluated by the `regex` package (a
backtracking engine with Unicode properties), sharing no code with models/split_rules_wide.cpp.

llama.cpp runs each regex in turn over the pieces the previous ones left (each match a piece, the
text between two matches a piece), with std::regex, which it feeds one of two ways: a regex
without \\p{..} gets the code points with every non-ASCII whitespace replaced by U+000B (so \\s
still means White_Space, and that whitespace falls in no other class); a regex with \\p{..} gets
the text with each non-ASCII code point replaced by one byte for its category, which the `regex`
package reproduces by matching the categories directly. Both are done here.

    pip install regex
    python3 tests/reference/make_pretokenizer_fixtures.py

Writes tests/fixtures/tokenizer_pre_splits.jsonl: {"pre": name, "id": corpus id or extra index,
"hex": the UTF-8 bytes, "pieces": [hex of each piece]}.
"""
import json
import pathlib
import unicodedata

import regex

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

# As llama-vocab.cpp writes them, beyond ASCII spelled as escapes here.
LATIN = ("A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
         "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
         "\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
         "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d"
         "\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4"
         "\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
         "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
         "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
         "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
         "\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
         "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943")
CONTRACTION = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
PRE = {
    "deepseek-llm": [
        "[\r\n]",
        "\\s?[" + LATIN + "]+",
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
        "\\s+$",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
        "\\p{N}+",
    ],
    "deepseek-v3": [
        "\\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
        "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    ],
    "gpt-4o": [
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" + CONTRACTION +
        "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" + CONTRACTION +
        "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
}
EXTRA = [
    "HTTPServer handles JSONData; McDonald's ÉCOLE éCOLE École naïve ÀÉÎ",
    "Ĳsselmeer İstanbul ǅemal ΑΘΗΝΑ Αθήνα МОСКВА Москва Ελληνικά",
    "数字12345678和汉字混合，全角！＂＃（）。日本語のひらがなとカタカナ、한국어 텍스트",
    "tabs\tand\u3000ideographic\u3000spaces\u00a0nbsp\u2003em  \n\n\r\n end   ",
    "e\u0301 combining marks: a\u0300\u0301b \u0915\u093f\u0928\u094d\u0926\u0940 \u0e20\u0e32\u0e29\u0e32",
    "path/to/file.txt\r\n// comment /* x */ 3.14159 -42 1e10 0x1F",
    "Fullwidth ＡＢＣ ａｂｃ １２３ and ‘quotes’ “double” — dash … ellipsis",
    "emoji 😀👍🏽 and symbols ©®™ ± × ÷ ≤ ≥ ∑ √ ∞ € £ ¥",
    "   leading spaces and trailing tab\t",
    "'s 'T 'Re 'VE 'm 'LL 'd don't WON'T y'all",
    "\u2028line\u2029para\u0085nel\u000bvt\u000cff",
    "Ⅻ ⅷ ½ ² ³ ¹ ① ٣٤٥ ०१२",
]


def wide_view(text: str) -> str:
    """What llama.cpp's std::wregex sees: non-ASCII White_Space code points as U+000B."""
    return "".join("\x0b" if ord(c) >= 0x80 and regex.match(r"\s", c) else c for c in text)


def split(text: str, exprs: list[str]) -> list[str]:
    pieces = [text] if text else []
    for expr in exprs:
        pattern = regex.compile(expr)
        view = (lambda s: s) if "\\p{" in expr else wide_view
        out = []
        for piece in pieces:
            seen = view(piece)
            at = 0
            for m in pattern.finditer(seen):
                if m.start() > at:
                    out.append(piece[at:m.start()])
                out.append(piece[m.start():m.end()])
                at = m.end()
            if at < len(piece):
                out.append(piece[at:])
        pieces = out
    return pieces


def main() -> None:
    entries = []
    with open(FIXTURES / "tokenizer_corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if "text" in e:  # the raw-byte entries are invalid UTF-8: llama.cpp's decoding, tested apart
                entries.append((e["id"], e["text"]))
    entries += [(f"extra-{i}", t) for i, t in enumerate(EXTRA)]
    lines = []
    for pre, exprs in PRE.items():
        for cid, text in entries:
            pieces = split(text, exprs)
            assert "".join(pieces) == text
            lines.append(json.dumps({"pre": pre, "id": cid, "hex": text.encode("utf-8", "surrogatepass").hex(),
                                     "pieces": [p.encode("utf-8", "surrogatepass").hex() for p in pieces]}))
    out = FIXTURES / "tokenizer_pre_splits.jsonl"
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(lines)} splits (unicodedata {unicodedata.unidata_version}, regex {regex.__version__})")


if __name__ == "__main__":
    main()
