# frozen_string_literal: true

# Puma configuration from the LAB_* environment (servers/README.md), as ruby-puma's: evaluated
# in the master before it binds, so every start-up error is one `lab: ...` line and exit 1;
# Lab::PumaServer.configure (../../ruby-puma/app.rb) maps the knobs onto Puma. Rails boots here,
# in the master (preload_app! when clustered), as `rails s` boots it.
begin
  require_relative "application"
  lab = Lab::RailsServer.boot # validates LAB_*, checks the database, boots Rails
rescue Lab::ConfigError => e
  warn "lab: #{e.message}"
  exit 1
end
Lab::PumaServer.configure(self, lab)
