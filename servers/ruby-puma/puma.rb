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
  master = Process.pid
  on_worker_boot do
    lab.start
  rescue Lab::ConfigError => e # Postgres refused this worker's connections
    lab.fail_worker(e.message, master)
  end
  on_worker_shutdown { lab.stop }
  at_exit do
    next unless Process.pid == master

    failed = lab.worker_failed?
    lab.remove_counter_dir
    exit 1 if failed
  end
else
  # LAB_PROCESSES=1: Puma's single mode, so the PID the lab starts serves requests.
  workers 0
  begin
    lab.start # every connection opens here, before Puma binds
  rescue Lab::ConfigError => e
    warn "lab: #{e.message}"
    exit 1
  end
  at_exit { lab.stop }
end
