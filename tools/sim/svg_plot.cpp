#include "sim/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace uroce::simlab {
namespace {

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// Colour-blind-safe palette (Okabe-Ito), then repeats.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#000000", "#F0E442"};

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || target < 1) return {lo};
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double mult = 1;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    mult = m;
    if (m * mag >= raw) break;
  }
  const double step = mult * mag;
  // Ticks as integers scaled once (k * mult / 10^n), so 0.6 prints as 0.6, not a sum's residue.
  const double inv = mag < 1 ? std::round(1 / mag) : 0;
  for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; k += 1)
    ticks.push_back(inv > 0 ? k * mult / inv : k * mult * mag);
  return ticks;
}

std::string render_svg(const Plot& p) {
  const double W = 960, L = 80, R = 250, T = 40, H = 300;
  const double plot_w = W - L - R;
  const double caption_h = 16.0 * static_cast<double>(p.caption.size()) + 10;
  const double total_h = T + H + 50 + caption_h;
  double xmin = 0, xmax = 0, ymax = p.y_min;
  bool any = false;
  for (const PlotSeries& s : p.series)
    for (const auto& [x, y] : s.points) {
      if (!any) xmin = xmax = x;
      any = true;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  xmin = std::min(xmin, p.x_min);
  if (!any || xmax <= xmin) xmax = xmin + 1;
  if (ymax <= p.y_min) ymax = p.y_min + 1;
  const std::vector<double> yt = nice_ticks(p.y_min, ymax, 6);
  ymax = std::max(ymax, yt.back());
  const std::vector<double> xt = nice_ticks(xmin, xmax, 8);
  auto X = [&](double x) { return L + plot_w * (x - xmin) / (xmax - xmin); };
  auto Y = [&](double y) { return T + H - H * (y - p.y_min) / (ymax - p.y_min); };

  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << total_h
    << "' viewBox='0 0 " << W << " " << total_h
    << "' font-family='DejaVu Sans, Arial, sans-serif' font-size='12'>\n";
  o << "<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << L << "' y='24' font-size='15' font-weight='bold'>" << escape(p.title)
    << "</text>\n";
  // Grid and ticks.
  for (double y : yt) {
    o << "<line x1='" << L << "' x2='" << L + plot_w << "' y1='" << fmt(Y(y)) << "' y2='"
      << fmt(Y(y)) << "' stroke='#e0e0e0'/>\n";
    o << "<text x='" << L - 6 << "' y='" << fmt(Y(y) + 4) << "' text-anchor='end'>" << fmt(y)
      << "</text>\n";
  }
  for (double x : xt) {
    if (x < xmin || x > xmax) continue;
    o << "<line x1='" << fmt(X(x)) << "' x2='" << fmt(X(x)) << "' y1='" << T << "' y2='" << T + H
      << "' stroke='#e0e0e0'/>\n";
    o << "<line x1='" << fmt(X(x)) << "' x2='" << fmt(X(x)) << "' y1='" << T + H << "' y2='"
      << T + H + 5 << "' stroke='black'/>\n";
    o << "<text x='" << fmt(X(x)) << "' y='" << T + H + 18 << "' text-anchor='middle'>" << fmt(x)
      << "</text>\n";
  }
  o << "<rect x='" << L << "' y='" << T << "' width='" << plot_w << "' height='" << H
    << "' fill='none' stroke='black'/>\n";
  o << "<text x='" << L + plot_w / 2 << "' y='" << T + H + 36 << "' text-anchor='middle'>"
    << escape(p.x_label) << "</text>\n";
  o << "<text transform='translate(" << 18 << "," << T + H / 2
    << ") rotate(-90)' text-anchor='middle'>" << escape(p.y_label) << "</text>\n";
  // Series and legend.
  for (size_t i = 0; i < p.series.size(); ++i) {
    const PlotSeries& s = p.series[i];
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    o << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5'"
      << (s.dashed ? " stroke-dasharray='6,3'" : "") << " points='";
    for (const auto& [x, y] : s.points) o << fmt(X(x)) << "," << fmt(Y(y)) << " ";
    o << "'/>\n";
    const double ly = T + 14 + 18.0 * static_cast<double>(i);
    o << "<line x1='" << L + plot_w + 12 << "' x2='" << L + plot_w + 36 << "' y1='" << ly - 4
      << "' y2='" << ly - 4 << "' stroke='" << color << "' stroke-width='2'"
      << (s.dashed ? " stroke-dasharray='6,3'" : "") << "/>\n";
    o << "<text x='" << L + plot_w + 42 << "' y='" << ly << "'>" << escape(s.name) << "</text>\n";
  }
  for (size_t i = 0; i < p.caption.size(); ++i)
    o << "<text x='" << L << "' y='" << T + H + 60 + 16.0 * static_cast<double>(i)
      << "' font-size='11' fill='#333'>" << escape(p.caption[i]) << "</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace uroce::simlab
