# _includes/anchor_headings.html of the site: a `#` link appended inside every heading with an id.
module AnchorHeadings
  def anchor_headings(html)
    html.gsub(%r{<(h[1-6]) id="([^"]+)">(.*?)</\1>}m) do
      %(<#{$1} id="#{$2}">#{$3}<a href="##{$2}" class="toc-anchor">#</a></#{$1}>)
    end
  end
end
Liquid::Template.register_filter(AnchorHeadings)
