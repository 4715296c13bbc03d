# frozen_string_literal: true

# GET /health (servers/README.md): who answers, with what, and how much it has done.
class HealthController < ApplicationController
  def show
    config = Lab.config
    render_json({
      server: "ruby-rails",
      versions: Lab::RailsServer.versions,
      sqlite_version: Lab::RailsServer.sqlite_version,
      sqlite_compile_options: Lab::RailsServer.sqlite_options,
      database: Lab.database.name,
      database_version: Lab::RailsServer.database_version,
      pid: Process.pid,
      knobs: {
        database: Lab.database.name,
        pragmas: pragmas,
        txn_mode: config.txn_mode,
        busy: config.busy,
        write_path: config.write_path,
        processes: config.processes,
        threads: config.threads,
        readers: config.readers,
        metrics_txn: config.metrics_txn,
        cache: config.cache,
        sql_log: config.sql_log,
        yjit: config.yjit,
      },
      emulated: {},
      requests_handled: Lab::Edge.counter.total,
      writer: Lab::RailsServer.writer&.counts,
    })
  end

  private

  # Each requested pragma read back from SQLite on a connection of the pool (null on Postgres).
  def pragmas
    return nil if Lab.config.postgres?

    Lab.config.pragmas.to_h { |name, _| [name, ActiveRecord::Base.connection.select_value("PRAGMA #{name}").to_s.downcase] }
  end
end
