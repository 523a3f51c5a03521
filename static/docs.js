// Swagger UI for /docs, from the vendored bundle (no CDN, no inline script: the CSP forbids both).
window.addEventListener("DOMContentLoaded", function () {
  var node = document.getElementById("swagger-ui");
  if (!node || typeof window.SwaggerUIBundle !== "function") return;
  window.SwaggerUIBundle({ url: node.dataset.spec || "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
});
