// Swagger UI for /docs, from the vendored bundle (no CDN, no inline script: the CSP forbids both).
window.addEventListener("DOMContentLoaded", function () {
  var node = document.getElementById("swagger-ui");
  if (!node || typeof window.SwaggerUIBundle !== "function") return;
  window.SwaggerUIBundle({ url: node.dataset.spec || "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
});
// Swagger UI's deep linking takes over hash changes, so the skip link would leave focus on itself:
// move focus to the content here instead (the same end the other pages reach through #main).
document.addEventListener("click", function (event) {
  var link = event.target && event.target.closest ? event.target.closest(".skip-link") : null;
  var main = document.getElementById("main");
  if (!link || !main) return;
  event.preventDefault();
  main.focus();
});
