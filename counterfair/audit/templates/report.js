(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("counterfair-data").textContent);
  var NAMES = DATA.metric_names;
  function all(selector, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll(selector));
  }
  function strip(text) {
    return text.indexOf(".") < 0 ? text : text.replace(/0+$/, "").replace(/\.$/, "");
  }
  // Python's "%.{p}g"
  function gfmt(x, p) {
    if (!isFinite(x)) { return String(x); }
    if (x === 0) { return "0"; }
    var e = x.toExponential(p - 1).split("e");
    var exp = parseInt(e[1], 10);
    if (exp < -4 || exp >= p) {
      var size = Math.abs(exp);
      return strip(e[0]) + "e" + (exp < 0 ? "-" : "+") + (size < 10 ? "0" : "") + size;
    }
    return strip(x.toFixed(Math.max(0, p - 1 - exp)));
  }
  function joinWords(words) {
    if (words.length < 2) { return words.join(""); }
    return words.slice(0, -1).join(", ") + " and " + words[words.length - 1];
  }
  function outside(ratio, tau) { return !(tau <= ratio && ratio <= 1 / tau); }
  function distance(r) { return r <= 0 ? Infinity : (r < 1 ? 1 / r : r); }

  var TOO_FEW = "too few rows", NOT_INFORMATIVE = "not informative";
  function evaluate(pred, tau) {
    var constant = pred.constant !== null && pred.constant !== undefined;
    return DATA.criteria.map(function (criterion) {
      var metrics = criterion.metrics;
      var judged = false;
      var verdicts = pred.groups.map(function (group) {
        if (group.small) { return TOO_FEW; }
        if (constant) { return NOT_INFORMATIVE; }
        var fails = false, undefinedRatio = false;
        metrics.forEach(function (m) {
          var cell = group.ratios[m];
          if (cell === null) { undefinedRatio = true; }
          else if (outside(cell[0], tau)) { fails = true; }
        });
        judged = judged || !group.reference;
        return fails ? "FAIL" : (undefinedRatio ? "n/a" : "pass");
      });
      var failing = [];
      metrics.forEach(function (m) {
        pred.groups.forEach(function (group, position) {
          var cell = group.ratios[m];
          if (verdicts[position] === "FAIL" && cell !== null && outside(cell[0], tau)) {
            failing.push([position, m, cell[0], cell[1]]);
          }
        });
      });
      var word;
      if (constant) { word = NOT_INFORMATIVE; }
      else if (failing.length) { word = "FAIL"; }
      else if (verdicts.indexOf("n/a") >= 0) { word = "n/a"; }
      else { word = judged ? "pass" : TOO_FEW; }
      return {criterion: criterion.key, label: criterion.label, word: word,
              failing: failing, verdicts: verdicts};
    });
  }

  function intervalClause(pred, group, metric, tau) {
    var interval = group.intervals ? group.intervals[metric] : null;
    if (!interval || pred.level === null || pred.level === undefined) { return ""; }
    var where = (interval[0] <= 1 / tau && interval[1] >= tau) ? "reaching into the band"
      : "outside the band";
    return " (" + pred.level + " interval " + interval[2] + " to " + interval[3] + ", " +
      where + ")";
  }

  function failingText(pred, result) {
    var parts = result.failing.map(function (f) {
      var g = pred.groups[f[0]];
      return g.attribute + " = " + g.shown + " (" + f[1] + " " + f[3] + ")";
    });
    return parts.length ? parts.join(", ") : "none";
  }

  function parityFindings(pred, results, tau) {
    var tauS = gfmt(tau, 6), invS = gfmt(1 / tau, 4);
    var out = [], passed = [], undecided = [];
    if (pred.constant_finding) { out.push({fail: false, text: pred.constant_finding}); }
    results.forEach(function (result) {
      if (result.word === "pass") { passed.push(result.label); return; }
      if (result.word === "n/a") { undecided.push(result.label); return; }
      if (result.word !== "FAIL") { return; }
      var worst = result.failing[0];
      result.failing.slice(1).forEach(function (item) {
        if (distance(item[2]) > distance(worst[2])) { worst = item; }
      });
      var seen = {};
      result.failing.forEach(function (f) { seen[f[0]] = true; });
      var count = Object.keys(seen).length;
      var g = pred.groups[worst[0]];
      out.push({fail: true, text: pred.name + " fails " + result.label + " at tau = " + tauS +
        ": " + count + " group" + (count > 1 ? "s" : "") + " outside the band " + tauS +
        " to " + invS + "; the farthest is " + g.attribute + " = " + g.label + ", whose " +
        NAMES[worst[1]] + " is " + worst[3] + " times its reference group's" +
        intervalClause(pred, g, worst[1], tau) + "."});
    });
    if (passed.length) {
      out.push({fail: false, text: pred.name + " passes " + joinWords(passed) +
        " at tau = " + tauS + ": every group's ratio lies within " + tauS + " to " + invS +
        "."});
    }
    if (undecided.length) {
      out.push({fail: false, text: pred.name + " cannot be judged on " +
        joinWords(undecided) + ": no group fails, but a ratio is undefined " +
        "(reference rate 0 or no cases)."});
    }
    (pred.notes || []).forEach(function (t) { out.push({fail: false, text: t}); });
    return out;
  }

  function setVerdict(cell, word) {
    cell.textContent = word;
    cell.setAttribute("data-v", word);
    var css = word === "pass" ? "pass" : (word === "FAIL" ? "fail" : "na");
    cell.className = cell.classList.contains("verdict") ? "verdict verdict-" + css : css;
  }

  function moveCharts(section, tau) {
    all("svg.ratio-chart", section).forEach(function (svg) {
      var lo = parseFloat(svg.getAttribute("data-lo"));
      var hi = parseFloat(svg.getAttribute("data-hi"));
      var panel = parseFloat(svg.getAttribute("data-panel"));
      var span = Math.log(hi) - Math.log(lo);
      all("rect.band", svg).forEach(function (band) {
        var x0 = parseFloat(band.getAttribute("data-x0"));
        var a = x0 + panel * (Math.log(Math.min(Math.max(tau, lo), hi)) - Math.log(lo)) / span;
        var b = x0 + panel * (Math.log(Math.min(Math.max(1 / tau, lo), hi)) - Math.log(lo)) / span;
        band.setAttribute("x", a.toFixed(2));
        band.setAttribute("width", Math.max(0, b - a).toFixed(2));
      });
      all("circle.pt", svg).forEach(function (point) {
        if (point.getAttribute("data-small") === "1") { return; }
        var ratio = parseFloat(point.getAttribute("data-ratio"));
        point.setAttribute("class", "pt " + (outside(ratio, tau) ? "fail" : "pass"));
      });
    });
  }

  function update(tau) {
    all(".tau-value").forEach(function (el) { el.textContent = gfmt(tau, 6); });
    all(".tau-inverse").forEach(function (el) { el.textContent = gfmt(1 / tau, 4); });
    var sentences = [];
    DATA.predictors.forEach(function (pred) {
      if (pred.task !== "classification") {
        pred.findings.forEach(function (t) { sentences.push({fail: false, text: t}); });
        return;
      }
      var results = evaluate(pred, tau);
      var section = document.getElementById(pred.id);
      results.forEach(function (result) {
        var row = section.querySelector("tr[data-criterion='" + result.criterion + "']");
        if (row) {
          setVerdict(row.querySelector("td.verdict"), result.word);
          var failing = row.querySelector("td.failing");
          failing.textContent = failingText(pred, result);
          failing.setAttribute("data-v", failing.textContent);
        }
        result.verdicts.forEach(function (word, position) {
          var cell = section.querySelector("td[data-g='" + position + "'][data-c='" +
                                           result.criterion + "']");
          if (cell) { setVerdict(cell, word); }
        });
      });
      moveCharts(section, tau);
      sentences = sentences.concat(parityFindings(pred, results, tau));
    });
    DATA.extra_findings.forEach(function (t) { sentences.push({fail: false, text: t}); });
    var list = document.getElementById("findings-list");
    while (list.firstChild) { list.removeChild(list.firstChild); }
    sentences.forEach(function (s) {
      var item = document.createElement("li");
      item.textContent = s.text;
      if (s.fail) { item.className = "fail"; }
      list.appendChild(item);
    });
  }

  function readTau(text) {
    var tau = Number(text);
    return (text !== "" && isFinite(tau) && tau > 0 && tau <= 1) ? tau : null;
  }

  var slider = document.getElementById("tau-slider");
  var box = document.getElementById("tau-input");
  var message = document.getElementById("tau-message");
  function setTau(text, source) {
    var tau = readTau(text);
    if (tau === null) {
      source.classList.add("invalid");
      message.textContent = "tau must be a number in (0, 1]";
      return;
    }
    source.classList.remove("invalid");
    message.textContent = "";
    if (source !== box) { box.value = text; }
    if (source !== slider) { slider.value = String(Math.max(tau, Number(slider.min))); }
    update(tau);
  }
  if (slider && box) {
    slider.addEventListener("input", function () { setTau(slider.value, slider); });
    box.addEventListener("input", function () { setTau(box.value, box); });
    box.addEventListener("change", function () { setTau(box.value, box); });
  }

  var filter = document.getElementById("group-filter");
  function applyFilter() {
    var wanted = filter ? filter.value : "";
    all("tr[data-attribute], .chart-block[data-attribute]").forEach(function (el) {
      var show = wanted === "" || el.getAttribute("data-attribute") === wanted;
      if (show) { el.removeAttribute("hidden"); } else { el.setAttribute("hidden", ""); }
    });
    all(".filter-state").forEach(function (el) {
      el.textContent = wanted === "" ? "all attributes" : wanted;
    });
  }
  if (filter) { filter.addEventListener("change", applyFilter); }

  function sortBy(table, column, header) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (row) {
      var cell = row.cells[column];
      return cell ? cell.getAttribute("data-v") || "" : "";
    });
    var numeric = keys.every(function (k) { return k === "" || isFinite(Number(k)); });
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var order = rows.map(function (row, i) { return i; });
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (x === "" || y === "") { return (x === "") - (y === "") || a - b; }
      var c = numeric ? Number(x) - Number(y) : (x < y ? -1 : (x > y ? 1 : 0));
      return (ascending ? c : -c) || a - b;
    });
    all("th", table.tHead).forEach(function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    order.forEach(function (i) { body.appendChild(rows[i]); });
  }
  all("table.sortable").forEach(function (table) {
    if (!table.tHead) { return; }
    all("th", table.tHead).forEach(function (th, column) {
      th.addEventListener("click", function () { sortBy(table, column, th); });
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sortBy(table, column, th);
        }
      });
    });
  });

  update(DATA.tau);
  applyFilter();
  document.documentElement.setAttribute("data-ready", "1");
})();
