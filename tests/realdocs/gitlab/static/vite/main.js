// What the site's script adds after load that a crawler sees: a `#` anchor link in each heading.
document.querySelectorAll('.docs-content h2[id], .docs-content h3[id], .docs-content h4[id]').forEach(function (h) {
  var a = document.createElement('a');
  a.className = 'anchor';
  a.href = '#' + h.id;
  a.textContent = '#';
  h.appendChild(a);
});
