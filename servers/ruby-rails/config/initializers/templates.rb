# frozen_string_literal: true

# The shared pages (servers/templates/*.html, $LAB_TEMPLATES) as ActionView templates: each
# {{field}} becomes `<%= field %>` (ERB's escaping of & < > " ', as the other stacks'), compiled
# once by ActionView and rendered with the row's columns as locals (lab/request, lab/user,
# lab/user_page).
templates = %w[request user user_page].to_h do |name|
  path = File.join(Lab.config.templates, "#{name}.html")
  raise Lab::ConfigError, "LAB_TEMPLATES='#{Lab.config.templates}' has no #{name}.html" unless File.file?(path)

  ["lab/#{name}.html.erb", File.read(path, encoding: "UTF-8").gsub(/\{\{(\w+)\}\}/) { "<%= #{Regexp.last_match(1)} %>" }]
end
ActionController::Base.prepend_view_path(ActionView::FixtureResolver.new(templates))
