// Release safety (docs/webapp.md, "Release safety"). Inlined into index.html ahead of
// every module by vite.config.ts, so it listens before any asset is asked
// for and works when none of the app's code loads. Plain ES2017 without
// imports: it is not bundled.
//
// A core asset (a script, a stylesheet, a module preload, a lazily loaded
// chunk) that fails to load usually means the page is from an older release
// whose hashed files are gone. The cure is one reload, with a parameter no
// cache has seen. If the last automatic reload was less than 30 s ago the
// cure did not work; reloading again would loop, so a "Refresh page" button
// is shown instead and the person decides.
(function () {
  'use strict';
  var KEY = 'changeflow.lastAutoReload';
  var WINDOW_MS = 30000;
  var PARAM = '__reload';
  var handled = false;

  function isCoreAsset(el) {
    if (!el || !el.tagName) return false;
    if (el.tagName === 'SCRIPT') return !!el.src;
    if (el.tagName === 'LINK') {
      var rel = String(el.rel || '').toLowerCase();
      return rel === 'stylesheet' || rel === 'modulepreload' || rel === 'preload';
    }
    return false;
  }

  function withParam(value) {
    var url = new URL(window.location.href);
    url.searchParams.set(PARAM, value);
    return url.toString();
  }

  function showRefreshButton() {
    var build = function () {
      if (document.getElementById('changeflow-refresh')) return;
      var bar = document.createElement('div');
      bar.id = 'changeflow-refresh';
      bar.setAttribute('role', 'alert');
      bar.style.cssText =
        'position:fixed;left:0;right:0;top:0;z-index:9999;padding:12px 16px;' +
        'background:#fff4d6;border-bottom:1px solid #d9b45a;color:#3b2f12;' +
        'font:15px/1.4 system-ui,sans-serif;display:flex;gap:12px;align-items:center';
      var text = document.createElement('span');
      text.textContent =
        'Part of this page could not be loaded, probably because a new version was just released.';
      var button = document.createElement('button');
      button.type = 'button';
      button.textContent = 'Refresh page';
      button.style.cssText = 'font:inherit;padding:4px 12px;cursor:pointer';
      button.addEventListener('click', function () {
        window.location.replace(withParam(String(Date.now())));
      });
      bar.appendChild(text);
      bar.appendChild(button);
      document.body.appendChild(bar);
    };
    if (document.body) build();
    else document.addEventListener('DOMContentLoaded', build);
  }

  // recover runs once per page, however many assets fail.
  function recover() {
    if (handled) return;
    handled = true;
    var now = Date.now();
    var last;
    try {
      last = Number(window.sessionStorage.getItem(KEY) || 0);
      // A clock that went backwards counts as recent: never loop.
      if (last && now - last < WINDOW_MS) {
        showRefreshButton();
        return;
      }
      window.sessionStorage.setItem(KEY, String(now));
    } catch (e) {
      // Without sessionStorage a reload could not be remembered, so none
      // is made automatically.
      showRefreshButton();
      return;
    }
    window.location.replace(withParam(String(now)));
  }

  // Load errors do not bubble: only a capture-phase listener on window
  // sees the failing <script> or <link>.
  window.addEventListener(
    'error',
    function (event) {
      if (isCoreAsset(event.target)) recover();
    },
    true,
  );
  // Vite's preload helper reports lazily loaded chunks (and their CSS) that
  // fail; preventDefault keeps it from throwing as well.
  window.addEventListener('vite:preloadError', function (event) {
    event.preventDefault();
    recover();
  });
  // The app's own lazy loader calls this when import() rejects.
  window.__changeflowRecover = recover;
})();
