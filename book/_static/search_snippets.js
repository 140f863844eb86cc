/* attnsvm: readable search snippets.
 *
 * Sphinx's search (searchtools.js) shows under each result a snippet cut from the text of the page's
 * HTML. In that HTML every formula is still its TeX source (MathJax typesets it in the browser), so
 * a snippet read "\(\lVert W\rVert \to \infty\)". This script (loaded after searchtools.js, on the
 * search page) wraps Search.htmlToText: before the text is taken, each formula element
 * (span.math, div.math) is replaced by a plain-text rendering of its TeX ("‖W‖ → ∞", "x_t", "𝕊(XWz)",
 * "(a)/(b)") and the theme's header, printed contents and footer are dropped (PAGE_CHROME). texToText is also exported for the tests (node).
 */
(function (root) {
  "use strict";

  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ϵ", varepsilon: "ε", zeta: "ζ",
    eta: "η", theta: "θ", vartheta: "ϑ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν",
    xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", upsilon: "υ", phi: "ϕ", varphi: "φ",
    chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Xi: "Ξ",
    Pi: "Π", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω", ell: "ℓ",
    top: "ᵀ", star: "⋆", ast: "∗", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠",
    approx: "≈", sim: "∼", equiv: "≡", propto: "∝", ll: "≪", gg: "≫", lesssim: "≲", gtrsim: "≳",
    to: "→", rightarrow: "→", leftarrow: "←", Rightarrow: "⇒", Leftarrow: "⇐", iff: "⇔",
    mapsto: "↦", infty: "∞", in: "∈", notin: "∉", subset: "⊂", subseteq: "⊆", cup: "∪",
    cap: "∩", emptyset: "∅", forall: "∀", exists: "∃", perp: "⊥", nabla: "∇", partial: "∂",
    sum: "Σ", prod: "∏", int: "∫", cdot: "·", times: "×", pm: "±", mp: "∓", circ: "∘",
    odot: "⊙", oplus: "⊕", ldots: "…", dots: "…", cdots: "⋯", mid: "|", vert: "|", lvert: "|",
    rvert: "|", Vert: "‖", lVert: "‖", rVert: "‖", "|": "‖", langle: "⟨", rangle: "⟩",
    lbrace: "{", rbrace: "}", "{": "{", "}": "}", "%": "%", "&": "&", "#": "#", _: "_", $: "$",
    S: "§", quad: " ", qquad: " ", ",": " ", ";": " ", ":": " ", "!": "", " ": " ", "\\": "; ",
  };
  // commands that only size or space what follows (dropped), and named functions (kept as words)
  const DROPPED = new Set(["left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl",
    "Bigr", "biggl", "biggr", "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits",
    "label", "nonumber", "notag", "tag", "rm", "bf", "it", "cal", "mathstrut"]);
  // opening delimiters: the space after them is the source's, not the formula's
  const OPENERS = new Set(["lVert", "lvert", "langle", "lbrace", "{"]);
  const FONTS = new Set(["mathrm", "mathbf", "mathit", "mathsf", "mathtt", "mathcal", "mathscr",
    "mathfrak", "boldsymbol", "bm", "text", "textrm", "textbf", "textit", "texttt", "mbox",
    "operatorname", "hbox", "emph", "mathop", "mathbin", "mathrel"]);
  const BLACKBOARD = { R: "ℝ", N: "ℕ", Z: "ℤ", Q: "ℚ", C: "ℂ", E: "𝔼", P: "ℙ", S: "𝕊", I: "𝕀" };
  const ACCENTS = { bar: "\u0304", overline: "\u0305", hat: "\u0302", widehat: "\u0302",
    tilde: "\u0303", widetilde: "\u0303", dot: "\u0307", ddot: "\u0308", vec: "\u20d7" };
  const SUP = { 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹",
    "+": "⁺", "-": "⁻", "−": "⁻", "=": "⁼", "(": "⁽", ")": "⁾", n: "ⁿ", i: "ⁱ", T: "ᵀ", "ᵀ": "ᵀ",
    "⋆": "⋆", "∗": "∗", "*": "*", "′": "′", "'": "′" };
  const SUB = { 0: "₀", 1: "₁", 2: "₂", 3: "₃", 4: "₄", 5: "₅", 6: "₆", 7: "₇", 8: "₈", 9: "₉",
    "+": "₊", "-": "₋", "=": "₌", "(": "₍", ")": "₎", a: "ₐ", e: "ₑ", h: "ₕ", i: "ᵢ", j: "ⱼ",
    k: "ₖ", l: "ₗ", m: "ₘ", n: "ₙ", o: "ₒ", p: "ₚ", r: "ᵣ", s: "ₛ", t: "ₜ", u: "ᵤ", v: "ᵥ",
    x: "ₓ", "⋆": "⋆" };

  function script(text, table, mark) {
    const chars = [...text.trim()];
    if (chars.length && chars.every((c) => c in table)) return chars.map((c) => table[c]).join("");
    return mark + (chars.length > 1 && !/^\w+$/.test(text.trim()) ? "(" + text.trim() + ")" : text.trim());
  }

  // A recursive-descent reading of the TeX: one "atom" at a time (a group, a command with its
  // arguments, or a character), rendered to text.
  function texToText(tex) {
    let s = String(tex).trim();
    for (const [open, close] of [["\\(", "\\)"], ["\\[", "\\]"], ["$$", "$$"], ["$", "$"]]) {
      if (s.startsWith(open) && s.endsWith(close) && s.length >= open.length + close.length) {
        s = s.slice(open.length, s.length - close.length);
        break;
      }
    }
    let i = 0;

    function skipSpace() { while (i < s.length && /\s/.test(s[i])) i++; }

    function group() {            // the argument of a command: {...} or one atom
      skipSpace();
      if (s[i] === "{") {
        i++;
        const text = sequence("}");
        i++;
        return text;
      }
      return atom();
    }

    function optional() {          // [..] of \sqrt[3]{x}
      skipSpace();
      if (s[i] !== "[") return "";
      const end = s.indexOf("]", i);
      if (end < 0) return "";
      const text = s.slice(i + 1, end);
      i = end + 1;
      return text;
    }

    function wrap(text) { return [...text].length > 1 && !/^[\w.]+$/.test(text) ? "(" + text + ")" : text; }

    function command() {
      i++;                                         // the backslash
      let name;
      if (/[a-zA-Z]/.test(s[i] || "")) {
        const match = /^[a-zA-Z]+/.exec(s.slice(i));
        name = match[0];
        i += name.length;
      } else {
        name = s[i] || "";
        i++;
      }
      if (name === "frac" || name === "tfrac" || name === "dfrac") {
        const a = group(), b = group();
        return wrap(a) + "/" + wrap(b);
      }
      if (name === "binom") { const a = group(), b = group(); return "C(" + a + ", " + b + ")"; }
      if (name === "sqrt") { const n = optional(); return (n ? n : "") + "√" + wrap(group()); }
      if (name === "mathbb") {
        const text = group();
        return [...text].map((c) => BLACKBOARD[c] || c).join("");
      }
      if (FONTS.has(name)) return group();
      if (name in ACCENTS) {
        const text = group();
        return [...text].length === 1 ? text + ACCENTS[name] : name + "(" + text + ")";
      }
      if (name === "begin" || name === "end") { group(); return " "; }
      if (DROPPED.has(name)) return "";
      if (OPENERS.has(name)) skipSpace();
      if (name in SYMBOLS) return SYMBOLS[name];
      return name;                              // \log, \max, \arg, \exp, \tanh, ...: the word
    }

    function atom() {
      skipSpace();
      const c = s[i];
      if (c === undefined) return "";
      if (c === "\\") return command();
      if (c === "{") { i++; const text = sequence("}"); i++; return text; }
      i++;
      if (c === "~") return " ";
      if (c === "&") return " ";
      return c;
    }

    function sequence(close) {
      let out = "";
      while (i < s.length && s[i] !== close) {
        if (/\s/.test(s[i])) {
          skipSpace();
          if (out && !out.endsWith(" ")) out += " ";
          continue;
        }
        if (s[i] === "^" || s[i] === "_") {
          const sup = s[i] === "^";
          i++;
          const arg = group();
          out = out.replace(/ $/, "");
          out += sup ? script(arg, SUP, "^") : script(arg, SUB, "_");
          continue;
        }
        if (s[i] === "'") { i++; out += "′"; continue; }
        if (/^\\(rVert|rvert|rangle|rbrace|\})/.test(s.slice(i))) out = out.replace(/ $/, "");
        const before = i;
        out += atom();
        if (i === before) i++;                    // a stray closing brace: skip it
      }
      return out;
    }

    const text = sequence(undefined);
    return text.replace(/\s+/g, " ").replace(/\s*;\s*$/, "").trim();
  }

  // Formula elements of a parsed page, replaced by their plain text.
  function plainFormulas(doc) {
    doc.querySelectorAll("span.math, div.math").forEach((el) => {
      el.textContent = " " + texToText(el.textContent) + " ";
    });
  }

  // The theme's parts of the main block that are not the page's text (the article header with the
  // download menu, the printed contents, the search box, the footer): without them a hit near the
  // top of a page shows the title and the first paragraph, not ".ipynb .md .pdf ... Contents ...".
  const PAGE_CHROME = [".bd-header-article", "#jb-print-docs-body", ".searchbox",
    ".bd-sidebar-secondary", ".prev-next-area", "footer"].join(", ");

  function install() {
    if (typeof Search === "undefined" || !Search.htmlToText || Search.htmlToText.attnsvm) return;
    const original = Search.htmlToText;
    const wrapped = function (htmlString, anchor) {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(PAGE_CHROME).forEach((el) => el.remove());
      plainFormulas(doc);
      // runs of white space collapsed: the snippet's 240 characters are text, not indentation
      return original("<!DOCTYPE html>" + doc.documentElement.outerHTML, anchor).replace(/\s+/g, " ").trim();
    };
    wrapped.attnsvm = true;
    Search.htmlToText = wrapped;
  }

  if (typeof module !== "undefined" && module.exports) {
    module.exports = { texToText: texToText };
  } else {
    install();
    if (root.document) root.document.addEventListener("DOMContentLoaded", install);
  }
})(typeof window !== "undefined" ? window : globalThis);
