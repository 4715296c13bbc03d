# frozen_string_literal: true

module Lab
  # This process as Puma runs it (ruby-puma's PumaServer: config/puma.rb): the checks in Puma's
  # master before it binds (a bad knob or database is one `lab:` line), Rails booted there, and
  # the connections each process opens before it serves.
  module RailsServer
    extend PumaServer

    class << self
      attr_reader :writer, :versions, :database_version, :sqlite_version, :sqlite_options

      def config = Lab.config
      def counter = Edge.counter

      # In the master: the database's schema checked with its own driver, then Rails booted
      # (eager loading every model and controller) and each model's columns read once.
      def boot
        @database_version = Lab.database.check
        @sqlite_version = config.postgres? ? PumaServer.linked_sqlite_version : @database_version
        @sqlite_options = PumaServer.linked_sqlite_options
        Edge.counter = PumaServer.counter(config, "ruby-rails")
        Rails.application.initialize!
        [Request, Metric, Item, User].each { |model| [model.columns_hash, model.primary_key] }
        ActiveRecord::Base.connection_pool.disconnect! # each process opens its own (start)
        @versions = {
          "ruby" => RUBY_VERSION,
          "rails" => Rails.version,
          "puma" => defined?(Puma::Const::PUMA_VERSION) ? Puma::Const::PUMA_VERSION : "unknown",
          "rack" => Rack.release,
          "sqlite3-ruby" => SQLite3::VERSION,
        }.merge(Lab.database.versions)
        @versions["pool"] = "ActiveRecord::ConnectionAdapters::ConnectionPool" if config.postgres?
        self
      rescue ConfigError
        raise
      rescue StandardError => e # Rails could not boot, or not open the database
        raise ConfigError, "#{e.class}: #{e.message.split.join(" ")}"
      end

      # Per process (after fork when clustered): every connection of the pool opened before the
      # process serves a request (the writer's among them) and the pool's schema cache filled
      # (columns, primary keys, indexes), so no request reads the schema; then the writer started.
      def start
        counter.after_fork
        ActiveRecord::Base.establish_connection
        pool = ActiveRecord::Base.connection_pool
        Array.new(pool.size) { pool.checkout }.each { |conn| pool.checkin(conn) }
        pool.with_connection { |conn| SCHEMA.each_key { |table| conn.schema_cache.add(table) } }
        @writer = ActiveRecordWriter.new(Lab.database, batch: config.write_path == "batch") if config.write_path != "pool"
      rescue StandardError => e # Postgres refused this process' connections
        raise ConfigError, "LAB_DATABASE_URL: cannot connect: #{e.message.split.join(" ")} " \
                           "(each process opens #{ActiveRecord::Base.connection_pool.size} connections; Postgres' max_connections?)"
      end

      # Graceful stop: Puma has finished the requests in flight; the writer answers what is
      # queued, then every connection closes.
      def stop
        @writer&.stop
        ActiveRecord::Base.connection_handler.clear_all_connections!
        counter.close
      end
    end
  end
end
