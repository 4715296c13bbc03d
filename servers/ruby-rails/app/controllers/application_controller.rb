# frozen_string_literal: true

# Every controller's base: a full ActionController::Base, as seed 000's scaffold (sessions,
# cookies, flash, ActionView), with the contract's answers for what goes wrong. Bodies are
# checked by Lab::Contract (ruby-puma's, the same rules) whatever their Content-Type; ids come
# from the route's path parameters.
class ApplicationController < ActionController::Base
  include Lab::Contract

  skip_forgery_protection # the article's load (hey, oha) posts without a CSRF token
  wrap_parameters false

  rescue_from StandardError, with: :failed
  rescue_from Lab::HttpError, with: :refused

  private

  # U+0000 in a string field is a 400 on Postgres (Lab::Contract#storable).
  def refuses_nul? = Lab.config.postgres?

  def path_id(key = :id) = parse_id(request.path_parameters[key].to_s)

  # The body as a JSON object (400 otherwise), or nil when it is empty.
  def body_object
    request.body.rewind
    body = read_body(request.env)
    body.empty? ? nil : parse_object(body)
  end

  # One write transaction: on this request's pooled connection, or in the writer's thread,
  # answered after its COMMIT (LAB_WRITE_PATH=writer|batch).
  def write(&work)
    return Lab::RailsServer.writer.submit(&work) if Lab::RailsServer.writer

    ActiveRecord::Base.transaction(&work)
  end

  def render_json(object, status: 200)
    render json: object, status: status
    response.charset = false # the contract's Content-Type: application/json, no charset
  end

  def render_page(template, fields)
    render template: "lab/#{template}", locals: fields, layout: false, content_type: "text/html"
  end

  def refused(error)
    response.headers.merge!(error.headers) if error.headers
    render_json({ error: error.message }, status: error.status)
  end

  # A busy or lost database is a 503 (Lab's SqliteDatabase/PostgresDatabase, from the driver's
  # error under ActiveRecord's); anything else a 500 without its trace.
  def failed(error)
    cause = error
    cause = cause.cause while cause.cause && !Lab.database.unavailable(cause)
    if (message = Lab.database.unavailable(cause))
      return render_json({ error: message }, status: 503)
    end

    logger.warn("lab: #{error.class}: #{error.message.split.join(" ")}")
    render_json({ error: "internal server error" }, status: 500)
  end
end
