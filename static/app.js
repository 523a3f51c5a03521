/* KV Ledger: draw charts from embedded JSON, keep slider read-outs live, copy buttons.
 * Everything here is progressive enhancement: without it the pages still read and submit. */
(function () {
  "use strict";

  // No cloud buttons: nothing leaves the page ("send to cloud" / "edit in Chart Studio" off).
  var PLOT_CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
                      modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  // Whether an element's htmx request is in flight: htmx puts its request class on the element's
  // hx-indicator when it names one (the plan form's is #busy), not on the element itself.
  function inFlight(el) {
    return (planIndicator(el) || el).classList.contains("htmx-request");
  }

  // A drag's stale position: htmx has already sent the plan form's newer request (hx-sync queue
  // last), and a chart was redrawn less than one redraw's cost ago. Its redraw is skipped so the
  // newest position draws sooner; the chart still redraws at least every other redraw's time, and
  // always for the last response (nothing newer in flight).
  var lastDraw = { end: -Infinity, cost: 0 };
  function staleDuringDrag() {
    var form = document.getElementById("plan-form");
    return !!form && inFlight(form) && performance.now() - lastDraw.end < lastDraw.cost;
  }

  // Only a chart whose figure changed is redrawn: a preserved chart (hx-preserve) keeps its element
  // across swaps, so the text it was last drawn from says whether the new fragment moved it.
  function drawCharts(root) {
    if (!window.Plotly) { return; }
    var charts = root.querySelectorAll ? root.querySelectorAll("[data-chart]") : [];
    var skip = staleDuringDrag();
    Array.prototype.forEach.call(charts, function (el) {
      var source = document.getElementById(el.getAttribute("data-chart"));
      if (!source) { return; }
      var version = source.getAttribute("data-version") || "1";
      var text = source.textContent;
      if (el.kvDrawnFrom === text) {
        if (el.getAttribute("data-drawn") !== version) { el.setAttribute("data-drawn", version); }
        return;
      }
      if (skip) { return; }
      el.kvDrawnFrom = text;
      var figure = JSON.parse(text);
      var begin = performance.now();
      window.Plotly.react(el, figure.data, figure.layout, PLOT_CONFIG).then(function () {
        el.setAttribute("data-drawn", version);
      });
      lastDraw = { end: performance.now(), cost: performance.now() - begin };
    });
  }

  // A slider read-out as en-US Intl.NumberFormat writes it with `digits` fraction digits ("1,234.50"),
  // without Intl: the first Intl.NumberFormat of a fresh renderer loads ICU's number data, 23-57 ms of
  // main thread in a new headless Chromium context (in-page, three fresh contexts), and start() formats
  // every read-out before DOMContentLoaded, while the first frame is being rasterized. The rounding is
  // Intl's: half away from zero on the number's shortest decimal form (0.95 -> "1.0", as String(0.95)
  // is "0.95"; toFixed would round the binary value, 0.9499..., to "0.9"). Checked against Intl on
  // 560,000 values of 0-3 digits in node. A value String() writes with an exponent goes to Intl.
  var formats = {};
  function formatFixed(value, digits) {
    var abs = String(Math.abs(value));
    if (!/^\d+(\.\d+)?$/.test(abs)) {
      var format = formats[digits] || (formats[digits] = new Intl.NumberFormat("en-US",
        { minimumFractionDigits: digits, maximumFractionDigits: digits }));
      return format.format(value);
    }
    var dot = abs.indexOf(".");
    var frac = dot < 0 ? "" : abs.slice(dot + 1);
    var kept = (dot < 0 ? abs : abs.slice(0, dot)) + (frac + new Array(digits + 1).join("0")).slice(0, digits);
    if (frac.charAt(digits) >= "5") {  // round up: the last digit that is not a 9 gains one, the 9s after it become 0s
      var i = kept.length - 1;
      while (i >= 0 && kept.charAt(i) === "9") { i--; }
      kept = (i < 0 ? "1" : kept.slice(0, i) + String.fromCharCode(kept.charCodeAt(i) + 1)) + new Array(kept.length - i).join("0");
    }
    var whole = kept.slice(0, kept.length - digits).replace(/\B(?=(\d{3})+$)/g, ",");
    var sign = value < 0 || Object.is(value, -0) ? "-" : "";
    return sign + whole + (digits ? "." + kept.slice(kept.length - digits) : "");
  }
  function showValue(input) {
    var out = document.getElementById(input.getAttribute("data-output"));
    if (!out) { return; }
    var digits = parseInt(input.getAttribute("data-digits") || "0", 10);
    var value = parseFloat(input.value);
    var text = isNaN(value) ? input.value : formatFixed(value, digits);
    if (out.textContent !== text) { out.textContent = text; }
  }

  function copyText(button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) { return; }
    var text = target.textContent.trim();
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      button.classList.add("copied");
      setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { selectAndCopy(target); done(); });
    } else {
      selectAndCopy(target);
      done();
    }
  }

  function selectAndCopy(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { document.execCommand("copy"); } catch (e) { /* the text stays selected for Ctrl+C */ }
  }

  document.addEventListener("input", function (event) {
    var el = event.target;
    if (el.matches && el.matches("input[data-output]")) { showValue(el); }
    if (el.matches && el.matches("[data-full-submit]")) {
      // A model change re-renders the whole form (allowed TP degrees change): no htmx fragment.
      event.stopPropagation();
    }
    if (el.matches && el.matches("input[type=range]") && el.form && el.form.hasAttribute("hx-get") && window.htmx) {
      // A slider tick asks at once ("slide"), without the text fields' typing delay; the form's
      // hx-sync="this:queue last" keeps one request in flight and only the newest position queued.
      event.stopPropagation();
      window.htmx.trigger(el.form, "slide");
    }
    if (el.matches && el.matches("input[type=checkbox]") && el.form && el.form.hasAttribute("hx-get") && window.htmx) {
      // A checkbox's value does not change when it is ticked, so the form's "input changed" trigger
      // would drop every toggle after the first: it asks at once, as a slider tick does.
      event.stopPropagation();
      window.htmx.trigger(el.form, "slide");
    }
  }, true);

  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.matches && el.matches("[data-full-submit]") && el.form) { el.form.submit(); }
    if (el.matches && el.matches("input[type=range]") && el.form && el.form.hasAttribute("hx-get")) { commitSoon(); }
  });

  // History: every slider tick replaces the address (HX-Replace-Url); a slider that is released
  // and left still for COMMIT_MS adds one entry, so Back returns to the what-if before it. The
  // entries carry htmx's state, so Back is htmx's history restore (a reload: no history cache).
  var COMMIT_MS = 700;
  var committed = window.location.pathname + window.location.search;
  var commitTimer = null;
  function commitSoon() {
    if (commitTimer) { window.clearTimeout(commitTimer); }
    commitTimer = window.setTimeout(commit, COMMIT_MS);
  }
  function commit() {
    commitTimer = null;
    // a request in flight (htmx marks its indicator), or its address not yet written (writeAddress,
    // after the frame): wait for the newest tick's address
    if (document.querySelector(".htmx-request") || nextAddress !== null) { commitSoon(); return; }
    var now = window.location.pathname + window.location.search;
    if (now === committed) { return; }
    window.history.replaceState({ htmx: true }, "", committed);
    window.history.pushState({ htmx: true }, "", now);
    committed = now;
  }

  // "Compare": A is the plan as this page was first opened, B the current (slider-moved) URL.
  var openedUrl = window.location.pathname + window.location.search;

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (button) { event.preventDefault(); copyText(button); return; }
    var compare = event.target.closest ? event.target.closest("a[data-compare-link]") : null;
    if (compare) {
      var current = window.location.pathname + window.location.search;
      compare.href = "/compare?a=" + encodeURIComponent(openedUrl) + "&b=" + encodeURIComponent(current);
    }
  });

  // htmx fires htmx:load on every piece of new content (in the document, unlike the swap events
  // of an outerHTML target, which is detached by then). The charts are redrawn once per swap, in a
  // microtask after htmx's synchronous swap and settle (settle delay 0, htmx-config in base.html),
  // so the numbers and the chart reach the screen in the same frame; Plotly.react diffs against
  // the (preserved) chart element.
  var pending = false;
  function scheduleDraw() {
    if (pending) { return; }
    pending = true;
    window.queueMicrotask(function () { pending = false; drawCharts(document); });
  }
  document.addEventListener("htmx:load", scheduleDraw);
  // a chart skipped as stale is drawn when the newer request ends, whatever its outcome
  document.addEventListener("htmx:afterRequest", scheduleDraw);

  // hx-swap="patch" (the plan form's results): the new fragment is laid over the live one in place,
  // node by node; only text and attributes that differ are written. An outerHTML swap of the
  // results removed and re-created every element of them on each slider tick (htmx fires a
  // cleanup event per removed element, then styles and lays out the new subtree from scratch):
  // most of a tick's browser time. A node of another kind or id is replaced; an element htmx acts
  // on (an hx- attribute) is replaced and handed to htmx to process; an hx-preserve element is
  // htmx's (it moves the live one back after the swap).
  function isHtmxElement(node) {
    if (node.nodeType !== 1) { return false; }
    for (var i = 0; i < node.attributes.length; i++) {
      var name = node.attributes[i].name;
      if (name.lastIndexOf("hx-", 0) === 0 && name !== "hx-preserve") { return true; }
    }
    return false;
  }
  function sameKind(a, b) {
    return a.nodeType === b.nodeType && a.nodeName === b.nodeName && (a.nodeType !== 1 || a.id === b.id);
  }
  // A <details>' open is the user's (they opened or closed it): a tick leaves it as it is.
  function userState(el, name) { return name === "open" && el.nodeName === "DETAILS"; }
  function patchAttributes(old, neu) {
    var i;
    for (i = old.attributes.length - 1; i >= 0; i--) {
      var name = old.attributes[i].name;
      if (!neu.hasAttribute(name) && !userState(old, name)) { old.removeAttribute(name); }
    }
    for (i = 0; i < neu.attributes.length; i++) {
      var attr = neu.attributes[i];
      if (old.getAttribute(attr.name) !== attr.value && !userState(old, attr.name)) { old.setAttribute(attr.name, attr.value); }
    }
  }
  function patchNode(old, neu, added) {
    if (old.nodeType !== 1) {
      if (old.nodeValue !== neu.nodeValue) { old.nodeValue = neu.nodeValue; }
      return;
    }
    patchAttributes(old, neu);
    var o = old.firstChild, n = neu.firstChild;
    while (n) {
      var next = n.nextSibling;
      if (n.nodeType === 1 && n.hasAttribute("hx-preserve") && !(o && sameKind(o, n))) {
        old.insertBefore(n, o);  // htmx's placeholder: the live element was moved out for the swap
      } else if (o && sameKind(o, n) && o.isEqualNode(n)) {
        o = o.nextSibling;  // unchanged (a native comparison): kept as it is, an htmx element too (already processed)
      } else if (o && sameKind(o, n) && !isHtmxElement(n)) {
        patchNode(o, n, added);
        o = o.nextSibling;
      } else if (o) {
        var replaced = o;
        o = o.nextSibling;
        old.replaceChild(n, replaced);
        added.push(n);
      } else {
        old.appendChild(n);
        added.push(n);
      }
      n = next;
    }
    while (o) { var gone = o; o = o.nextSibling; old.removeChild(gone); }
  }
  if (window.htmx) {
    window.htmx.defineExtension("kv-patch", {
      handleSwap: function (style, target, fragment) {
        if (style !== "patch") { return false; }
        var neu = fragment.firstElementChild;
        var added = [];
        if (neu && sameKind(target, neu) && !neu.nextElementSibling) {
          patchNode(target, neu, added);
        } else {  // not one element of the target's kind: replace the target like outerHTML
          while (fragment.firstChild) { added.push(fragment.firstChild); target.parentNode.insertBefore(fragment.firstChild, target); }
          target.parentNode.removeChild(target);
        }
        scheduleDraw();
        return added.length ? added : true;  // htmx processes (and fires htmx:load on) what is new
      }
    });
  }

  // A plan-form response brings out-of-band only the field errors it has (plan.html): empty every
  // error slot of the form first, in the same task as the swap, so a fixed field's message goes.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var form = event.detail.requestConfig ? event.detail.requestConfig.elt : null;  // who asked (the target is #results)
    if (!event.detail.shouldSwap || !form || form.id !== "plan-form") { return; }
    Array.prototype.forEach.call(form.querySelectorAll(".field-error"), function (slot) {
      if (slot.textContent !== "") { slot.textContent = ""; }
    });
    deferAddress(event.detail.xhr);
    planSwap = true;
  });

  // A plan-form response's out-of-band pieces (the summary line, the save form, a field's error)
  // are patched in place like the results: htmx's outerHTML swap cloned, replaced and processed
  // each one on every tick. An element htmx acts on keeps htmx's swap.
  var planSwap = false;
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var d = event.detail, target = d.target, neu = d.fragment ? d.fragment.firstElementChild : null;
    if (!planSwap || !d.shouldSwap || !target || !neu || neu.nextElementSibling || !sameKind(target, neu)
        || isHtmxElement(target) || isHtmxElement(neu)) { return; }
    var added = [];
    patchNode(target, neu, added);
    added.forEach(function (node) { if (node.nodeType === 1) { window.htmx.process(node); } });
    d.shouldSwap = false;
  });
  function planSwapDone() { planSwap = false; }
  document.addEventListener("htmx:afterSwap", planSwapDone);
  document.addEventListener("htmx:afterRequest", planSwapDone);

  // A tick's address (HX-Replace-Url): htmx writes it before the swap, with two replaceState calls
  // (the current address again, then the new one), each a synchronous round trip to the browser
  // process, so the new numbers waited for both. For a plan-form response htmx's history writes
  // are off during its swap; the address is written once, after the frame that shows the numbers,
  // when the page is next idle (a replaceState took 5-8 ms of the main thread on a busy machine,
  // work a waiting response or the next frame must not queue behind), and only the newest of a
  // drag's. Back/forward (htmx's restore) and other forms are unchanged.
  var nextAddress = null;
  var whenIdle = window.requestIdleCallback
    ? function (callback) { window.requestIdleCallback(callback, { timeout: 50 }); }
    : function (callback) { setTimeout(callback, 0); };
  function deferAddress(xhr) {
    var url = xhr && responseHeader.call(xhr, "HX-Replace-Url");  // htmx is not shown it (below)
    if (!url || !window.htmx) { return; }
    window.htmx.config.historyEnabled = false;
    var first = nextAddress === null;
    nextAddress = url;
    if (first) {
      window.requestAnimationFrame(function () { whenIdle(writeAddress); });
    }
  }
  function writeAddress() {
    var url = nextAddress;
    nextAddress = null;
    if (url && url !== window.location.pathname + window.location.search) {
      window.history.replaceState({ htmx: true }, "", url);
    }
  }
  function historyOn() { if (window.htmx) { window.htmx.config.historyEnabled = true; } }

  // The same address, as htmx saw it: before its (switched-off) history write htmx still queried the
  // page for [hx-history="false" i] and made three sessionStorage writes per tick. For a plan-form
  // request htmx is not shown HX-Replace-Url (it asks getResponseHeader; writeAddress above reads
  // the header itself and writes the address), so it has no history update to make.
  var responseHeader = XMLHttpRequest.prototype.getResponseHeader;
  document.addEventListener("htmx:beforeSend", function (event) {
    var d = event.detail, xhr = d.xhr, form = d.requestConfig ? d.requestConfig.elt : null;
    if (!xhr || !form || form.id !== "plan-form") { return; }
    xhr.getResponseHeader = function (name) {
      return String(name).toLowerCase() === "hx-replace-url" ? null : responseHeader.call(xhr, name);
    };
  });
  document.addEventListener("htmx:afterSwap", historyOn);
  document.addEventListener("htmx:afterRequest", historyOn);

  // A plan-form request that fails (the network, or a 5xx htmx does not swap) leaves the results of
  // the last plan computed beside sliders that moved on: the form says so where "updating…" shows,
  // until its next request (a newer queued one goes out in the same task, so it clears at once).
  var FAILED_TEXT = "not updated: the request failed; the results are the last plan computed (Recalculate retries)";
  function planIndicator(form) {
    var named = form.getAttribute("hx-indicator");
    return named ? document.querySelector(named) : null;
  }
  function markFailed(event) {
    var form = event.target;
    var busy = form && form.id === "plan-form" ? planIndicator(form) : null;
    if (!busy) { return; }
    if (!busy.hasAttribute("data-idle-text")) { busy.setAttribute("data-idle-text", busy.textContent); }
    busy.textContent = FAILED_TEXT;
    busy.classList.add("failed");
  }
  document.addEventListener("htmx:sendError", markFailed);
  document.addEventListener("htmx:responseError", markFailed);
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.target;
    var busy = form && form.id === "plan-form" ? planIndicator(form) : null;
    if (busy && busy.classList.contains("failed")) {
      busy.textContent = busy.getAttribute("data-idle-text");
      busy.classList.remove("failed");
    }
  });

  // The admission formulas: a plan-form request names the rows open now (KV-Explain-Open), and a
  // tick's fragment carries only their formula bodies (a closed row's was 11 KB of each 32 KB
  // fragment, parsed and patched every tick unseen). A row opened, or open when a response left
  // its body out (a request sent before it was opened), fetches the plan of the form's current
  // values with its key and lays that body in; a newer response patches over it as usual.
  var EXPLAIN_ROWS = "#admission details[data-item]";
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!form || form.id !== "plan-form") { return; }
    event.detail.headers["KV-Explain-Open"] = Array.prototype.map.call(
      document.querySelectorAll(EXPLAIN_ROWS + "[open]"), function (d) { return d.getAttribute("data-item"); }).join(",");
  });
  function planQuery(form) {
    return (form.getAttribute("hx-get") || form.action) + "?" + new URLSearchParams(new FormData(form)).toString();
  }
  function fillExplain(details) {
    var body = details.querySelector(".explain-body[data-deferred]");
    var form = document.getElementById("plan-form");
    var key = details.getAttribute("data-item");
    if (!details.open || !body || !form || details.kvExplainUrl === planQuery(form)) { return; }
    var url = planQuery(form);
    details.kvExplainUrl = url;
    window.fetch(url, { headers: { "HX-Request": "true", "KV-Explain-Open": key } }).then(function (response) {
      return response.ok ? response.text() : null;
    }).then(function (text) {
      details.kvExplainUrl = null;
      var live = details.querySelector(".explain-body[data-deferred]");
      if (text === null || !live) { return; }
      if (planQuery(form) !== url) { fillSoon(); return; }  // the form moved on meanwhile: ask again
      var parsed = document.createElement("template");
      parsed.innerHTML = text;
      var fresh = parsed.content.querySelector('details[data-item="' + key + '"] .explain-body');
      if (fresh && !fresh.hasAttribute("data-deferred")) { live.parentNode.replaceChild(fresh, live); }
    }, function () { details.kvExplainUrl = null; });
  }
  function fillOpen() {
    Array.prototype.forEach.call(document.querySelectorAll(EXPLAIN_ROWS + "[open]"), fillExplain);
  }
  function fillSoon() { setTimeout(fillOpen, 0); }
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details.matches && details.matches(EXPLAIN_ROWS)) { fillExplain(details); }
  }, true);  // toggle does not bubble
  document.addEventListener("htmx:afterSwap", function (event) {
    var form = event.detail.requestConfig ? event.detail.requestConfig.elt : null;
    if (form && form.id === "plan-form") { fillOpen(); }
  });

  // A deploy-file block (<details data-export-url>) loads its file from the download route when it
  // is opened (the mouse or the keyboard: the details' own toggle), into its <pre> as text, never
  // parsed as HTML. As an htmx element (hx-get, its URL changing with every tick) each of them was
  // re-created and processed by htmx on every slider tick; as a plain element the patch swap only
  // rewrites its URL. A response for an address the block no longer has (a tick moved it) is dropped.
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.open || !details.hasAttribute || !details.hasAttribute("data-export-url")) { return; }
    var url = details.getAttribute("data-export-url");
    var pre = details.querySelector("pre");
    if (!pre || (details.kvLoaded === url && pre.textContent === details.kvText)) { return; }
    var current = function () { return details.getAttribute("data-export-url") === url; };
    window.fetch(url, { headers: { Accept: "text/plain, */*" } }).then(function (response) {
      return response.text().then(function (text) {
        if (!current()) { return; }
        if (!response.ok) { text = "Could not load this file (HTTP " + response.status + "); the download link above has it."; }
        pre.textContent = text;
        details.kvLoaded = response.ok ? url : null;
        details.kvText = pre.textContent;
      });
    }, function () {
      if (current()) { pre.textContent = "Could not load this file (the request failed); the download link above has it."; }
    });
  }, true);  // toggle does not bubble

  // The chart library (the page names it in <meta name="kvledger-charts">) loads after the first
  // paint: numbers and tables are readable before any chart code is fetched or run.
  var chartsRequested = false;
  function loadChartLibrary() {
    var meta = document.querySelector("meta[name='kvledger-charts']");
    if (!meta || window.Plotly || chartsRequested) { return; }
    chartsRequested = true;
    var script = document.createElement("script");
    script.src = meta.getAttribute("content");
    script.async = true;
    script.onload = scheduleDraw;
    document.head.appendChild(script);
  }

  // After the first paint as the browser reports it (the Paint Timing entry, which Chromium records
  // when the frame is presented, later than the frame's own callbacks); where that is not
  // observable, after the first frame. A fallback timer covers a page that is never painted.
  function afterFirstPaint(callback) {
    var called = false;
    var once = function () { if (!called) { called = true; callback(); } };
    var types = window.PerformanceObserver && PerformanceObserver.supportedEntryTypes;
    if (types && types.indexOf("paint") >= 0) {
      new PerformanceObserver(function (list, observer) { observer.disconnect(); once(); })
        .observe({ type: "paint", buffered: true });
      setTimeout(once, 3000);
    } else {
      window.requestAnimationFrame(function () { setTimeout(once, 0); });
    }
  }

  function start() {
    document.documentElement.classList.add("js");
    afterFirstPaint(loadChartLibrary);
    drawCharts(document);
    Array.prototype.forEach.call(document.querySelectorAll("input[data-output]"), showValue);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
