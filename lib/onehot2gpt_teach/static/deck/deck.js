// The course's lecture deck (onehot2gpt_teach.slides): start reveal.js at the deck's size, typeset the
// formulas, then give every slide whose content is taller than the slide a continuation slide below
// it, moving the cells that do not fit there in order (again and again, until every slide fits). A
// code cell taller than a slide continues with its outputs on the next slide; code or outputs still
// taller than a slide scroll. window.onehot2gptDeck.ready is true when the deck is laid out; .split
// and .scrolled count what was done, .error says what failed.
(function () {
  "use strict";
  var settings = window.ONEHOT2GPT_DECK;
  var W = settings.width;
  var H = settings.height;
  var deck = (window.onehot2gptDeck = { ready: false, split: 0, scrolled: 0, error: null });

  function leaves() {
    var all = document.querySelectorAll(".reveal .slides section");
    return Array.prototype.filter.call(all, function (s) {
      return !s.querySelector("section");
    });
  }

  // reveal.js hides the slides far from the current one (display: none); show one while measuring it.
  function whileShown(slide, fn) {
    var saved = [];
    for (var el = slide; el && el.tagName === "SECTION"; el = el.parentElement) {
      saved.push([el, el.style.display]);
      el.style.display = "block";
    }
    try {
      return fn();
    } finally {
      saved.forEach(function (pair) {
        pair[0].style.display = pair[1];
      });
    }
  }

  // Each slide's title: its first heading, or the last heading before it.
  function setTitles(slides) {
    var last = "";
    slides.forEach(function (slide) {
      var heading = slide.querySelector("h1, h2, h3");
      if (heading) last = heading.textContent.replace(/¶/g, "").trim();
      slide.dataset.deckTitle = last;
    });
  }

  // Move the cells of `slide` that end below its bottom edge to a new slide right after it; return
  // that slide, or null when `slide` fits.
  function fit(slide) {
    return whileShown(slide, function () {
      if (slide.scrollHeight <= H) return null;
      var style = getComputedStyle(slide);
      var bottom = H - parseFloat(style.paddingBottom);
      var items = Array.prototype.slice.call(slide.children);
      var k = items.findIndex(function (e) {
        return e.offsetTop + e.offsetHeight > bottom;
      });
      if (k < 0) k = items.length - 1;
      var start = slide.classList.contains("deck-continued") ? 1 : 0; // after the "(continued)" line
      if (k <= start) {
        var cell = items[k];
        var input = cell.querySelector(":scope > .jp-Cell-inputWrapper");
        if (input && input.nextElementSibling && !cell.classList.contains("deck-outputs")) {
          // A code cell whose code and outputs do not fit together: its outputs go on, as a cell of
          // their own, to the next slide (and scroll there if they alone are taller than a slide).
          var rest = cell.cloneNode(false);
          rest.removeAttribute("id");
          rest.classList.add("deck-outputs");
          while (input.nextSibling) rest.appendChild(input.nextSibling);
          cell.parentNode.insertBefore(rest, cell.nextSibling);
          items = Array.prototype.slice.call(slide.children);
        }
        if (cell.offsetTop + cell.offsetHeight > bottom) {
          // One cell taller than the slide: it scrolls.
          cell.style.maxHeight = Math.max(120, bottom - cell.offsetTop) + "px";
          cell.style.overflowY = "auto";
          cell.style.boxSizing = "border-box";
          cell.classList.add("deck-scrolls");
          deck.scrolled += 1;
        }
        k += 1;
      }
      if (k >= items.length) return null;
      var title = slide.dataset.deckTitle;
      var next = document.createElement("section");
      next.className = "deck-continued";
      next.dataset.deckTitle = title;
      if (title) {
        var label = document.createElement("p");
        label.className = "deck-continued-title";
        label.textContent = title + " (continued)";
        next.appendChild(label);
      }
      items.slice(k).forEach(function (e) {
        next.appendChild(e);
      });
      if (slide.parentElement.classList.contains("slides")) {
        // A slide without sub-slides: make it a vertical stack so the continuation goes below it.
        var stack = document.createElement("section");
        slide.parentElement.insertBefore(stack, slide);
        stack.appendChild(slide);
      }
      slide.parentElement.insertBefore(next, slide.nextSibling);
      deck.split += 1;
      return next;
    });
  }

  function fitAll() {
    var queue = leaves();
    setTitles(queue);
    for (var i = 0; i < queue.length; i++) {
      var next = fit(queue[i]);
      if (next) queue.splice(i + 1, 0, next);
    }
  }

  var loaded = new Promise(function (resolve) {
    if (document.readyState === "complete") resolve();
    else window.addEventListener("load", resolve);
  });
  loaded
    .then(function () {
      return window.MathJax && MathJax.startup
        ? MathJax.startup.promise.then(function () {
            return MathJax.typesetPromise();
          })
        : null;
    })
    .then(function () {
      return document.fonts ? document.fonts.ready : null;
    })
    .then(function () {
      return Reveal.initialize({
        width: W,
        height: H,
        margin: 0,
        center: false,
        controls: true,
        progress: true,
        hash: true,
        slideNumber: "c/t",
        transition: "slide",
      });
    })
    .then(function () {
      if (settings.fit) {
        fitAll();
        Reveal.sync();
        Reveal.layout();
      }
      deck.ready = true;
    })
    .catch(function (e) {
      deck.error = String((e && e.stack) || e);
      console.error(e);
    });
})();
