# frozen_string_literal: true

# The ruby-rails server: a Rails 6.1 application (ActiveRecord models, controllers, routes,
# ActionView templates) in production mode under Puma, from Debian's packages without Bundler.
# The LAB_* environment is read and checked by ruby-puma's Lab::Config (../../ruby-puma/app.rb),
# as are the request bodies (Lab::Contract) and the start-up check of the database: the two
# Ruby stacks refuse and store alike, and differ by what Rails does between the socket and the
# database. config/puma.rb boots this file in Puma's master.

require_relative "../../ruby-puma/app" # Lab::Config, Lab::Contract, Lab::Counter, Lab::SqlLog, Lab::Writer ...

module Lab
  # This process' LAB_* settings (read once, in the master), checked before Rails loads: a
  # refused start is its one `lab:` line without the load.
  def self.config = @config ||= Config.new(ENV)
end
Lab.config

begin
  require "rails"
  require "active_record/railtie"
  require "action_controller/railtie"
  require "action_view/railtie"
  require "action_view/testing/resolvers"
rescue LoadError => e
  raise Lab::ConfigError, "#{e.message}: install the Debian package ruby-rails (Rails 6.1)"
end

module Lab
  # The raw-driver side of the database (ruby-puma's SqliteDatabase or PostgresDatabase): the
  # start-up check of its schema, its versions, which errors are a 503.
  def self.database
    @database ||= if config.postgres?
                    require_relative "../../ruby-puma/postgres"
                    PostgresDatabase.new(config)
                  else
                    SqliteDatabase.new(config, nil)
                  end
  end

  # ActiveRecord's connection settings for LAB_*. The pool holds LAB_READERS connections (+ the
  # writer's on the writer|batch paths); a thread waits for one as long as it must, as Lab::Pool.
  def self.active_record_config
    c = config
    pool = c.readers + (c.write_path == "pool" ? 0 : 1)
    common = { "pool" => pool, "checkout_timeout" => 3600, "idle_timeout" => 0, "reaping_frequency" => nil }
    return common.merge("adapter" => "postgresql", "prepared_statements" => true).merge(postgres_params) if c.postgres?

    sqlite = { "adapter" => "sqlite3", "database" => c.db }
    # Rails' own `timeout:` is sqlite3_busy_timeout (config/initializers/sqlite_profiles.rb installs
    # the other policies); LAB_CACHE=shared: the gem passes `flags:` to sqlite3_open_v2.
    sqlite["timeout"] = c.busy_arg if c.busy_kind == "busy_timeout"
    sqlite["flags"] = Conn::SHARED_CACHE_FLAGS if c.cache == "shared"
    common.merge(sqlite)
  end

  # LAB_DATABASE_URL (a libpq key=value string) as ActiveRecord's connection keys.
  def self.postgres_params
    PG::Connection.conninfo_parse(config.database_url).each_with_object({}) do |o, out|
      out[o[:keyword]] = o[:val] if o[:val]
    end.merge("application_name" => "ruby-rails") { |_, given, _| given }
  end

  class Application < Rails::Application
    config.load_defaults 6.1
    config.root = File.expand_path("..", __dir__)
    config.eager_load = true
    config.cache_classes = true
    config.consider_all_requests_local = false
    config.secret_key_base = "lab" * 32 # seed 000 ran SECRET_KEY_BASE=asdf
    # Seed 000 ran RAILS_LOG_LEVEL=warn; no access log (servers/README.md): warnings to stderr
    config.logger = ActiveSupport::Logger.new($stderr)
    config.log_level = :warn
    config.active_record.dump_schema_after_migration = false
    config.action_controller.perform_caching = false
    # Rack::MethodOverride reads a POST without a Content-Type as an HTML form; the contract
    # parses every body as JSON (Lab::Contract), whatever its Content-Type.
    config.middleware.delete Rack::MethodOverride
    # Every error Rails answers outside a controller (a malformed URL...) is the contract's JSON.
    config.exceptions_app = ->(env) { Lab::Edge.error_response(env["PATH_INFO"].to_s.delete("/").to_i) }
  end
end

require_relative "../lib/lab/edge"
require_relative "../lib/lab/active_record_writer"
require_relative "../lib/lab/lifecycle"
Lab::Application.config.middleware.insert_before 0, Lab::Edge
