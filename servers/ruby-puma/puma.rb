# frozen_string_literal: true

# Puma configuration from the LAB_* environment (see README.md). Evaluated in the master before
# it binds, so every start-up error is one `lab: ...` line and exit 1; Lab::PumaServer.configure
# (app.rb) maps the knobs onto Puma.
require_relative "app"

begin
  lab = Lab.app # validates LAB_*, the database and the templates
rescue Lab::ConfigError => e
  warn "lab: #{e.message}"
  exit 1
end
Lab::PumaServer.configure(self, lab)
