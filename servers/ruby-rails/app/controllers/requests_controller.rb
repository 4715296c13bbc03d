# frozen_string_literal: true

# Seed 000's scaffold, its `create` as the article changed it.
class RequestsController < ApplicationController
  def create
    parameters = begin
      JSON.generate(body_object || {})
    rescue JSON::GeneratorError # e.g. 1e400, which Ruby parses as Infinity
      raise Lab::HttpError.new(400, "body has a number out of range")
    end
    url = +"#{request.protocol}#{request.host_with_port}/requests"
    url << "?" << request.query_string unless request.query_string.empty?
    now = timestamp
    record = write do
      Request.create!(uid: SecureRandom.uuid, ip: request.remote_ip, method: "POST", url: utf8(url),
                      parameters: parameters, created_at: now, updated_at: now)
    end
    # The scaffold's redirect with its notice (a session cookie), to the contract's relative Location.
    redirect_to "/requests/#{record.id}", notice: "Request was successfully created."
    response.location = "/requests/#{record.id}"
    self.response_body = %(<html><body>You are being <a href="#{response.location}">redirected</a>.</body></html>)
  end

  def show
    id = path_id
    record = Request.find_by(id: id)
    raise Lab::HttpError.new(404, "request #{id} not found") unless record

    render_page("request", record.attributes.symbolize_keys)
  end
end
