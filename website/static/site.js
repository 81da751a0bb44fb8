// The course site's own script (no network): search over search_index.js, and Prev/Next on the players.
(function () {
  "use strict";

  function escapeHtml(s) {
    return s.replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  // Search: every word of the query must appear in the page's text; a snippet around the first hit.
  function search(query) {
    var words = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return [];
    return (window.SITE_INDEX || []).filter(function (p) {
      var t = (p.title + " " + p.text).toLowerCase();
      return words.every(function (w) { return t.indexOf(w) >= 0; });
    }).map(function (p) {
      var i = p.text.toLowerCase().indexOf(words[0]);
      var start = Math.max(0, i - 60);
      return { href: p.href, title: p.title, snippet: (start ? "…" : "") + p.text.slice(start, i + 100) + "…" };
    });
  }

  function setUpSearch() {
    var box = document.querySelector(".site-search");
    var list = document.querySelector(".site-results");
    if (!box || !list) return;
    box.addEventListener("input", function () {
      var hits = search(box.value);
      list.innerHTML = hits.map(function (h) {
        return '<li><a href="' + h.href + "#:~:text=" + encodeURIComponent(box.value.trim().split(/\s+/)[0]) + '">' +
          escapeHtml(h.title) + '</a><span class="site-snippet">' + escapeHtml(h.snippet) + "</span></li>";
      }).join("") || (box.value.trim() ? '<li class="site-none">' + escapeHtml(box.getAttribute("data-none") || "no match") + "</li>" : "");
    });
  }

  // A player's Prev/Next are kernel-side buttons; with no kernel, move its slider with the keys instead
  // (the slider drives the frames through the page's own widget links).
  function stepPlayer(button, key) {
    var player = button.closest(".pl-player");
    var handle = player && player.querySelector(".noUi-handle");
    if (!handle) return;
    handle.dispatchEvent(new KeyboardEvent("keydown", { key: key, bubbles: true, cancelable: true }));
  }

  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest(".pl-player .pl-prev, .pl-player .pl-next");
    if (b) stepPlayer(b, b.classList.contains("pl-prev") ? "ArrowLeft" : "ArrowRight");
  }, true);

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpSearch);
  else setUpSearch();
})();
