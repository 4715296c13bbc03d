# frozen_string_literal: true

# Puma configuration from the LAB_* environment (see README.md). Evaluated in the
# master before it binds, so every start-up error is one `lab: ...` line and exit 1.
require_relative "app"

begin
  lab = Lab.app # validates LAB_*, the database and the templates
rescue Lab::ConfigError => e
  warn "lab: #{e.message}"
  exit 1
end
config = lab.config

environment "production"
quiet # no access log
raise_exception_on_sigterm false # SIGTERM: graceful stop, then exit 0
host = config.host.include?(":") ? "[#{config.host}]" : config.host
bind "tcp://#{host}:#{config.port}"
threads config.threads, config.threads

if config.clustered?
  # Clustered: the app (templates, config) is built once in the master; each worker
  # opens its own connections after fork and never shares them.
  workers config.processes
  preload_app!
  on_worker_boot { lab.start }
  on_worker_shutdown { lab.stop }
  master = Process.pid
  at_exit { lab.remove_counter_dir if Process.pid == master }
else
  # LAB_PROCESSES=1: Puma's single mode, so the PID the lab starts serves requests.
  workers 0
  lab.start
  at_exit { lab.stop }
end
