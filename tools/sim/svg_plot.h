#pragma once
// A line chart as a self-contained SVG (no runtime dependency): axes with ticks at round values
// and their units, a legend naming each series, and a caption (the run's parameters and seed).
// Every experiment draws its figures with it, so they all look alike (docs/experiments.md).
#include <string>
#include <utility>
#include <vector>

namespace uroce::simlab {

struct PlotSeries {
  std::string name;                               // the legend entry
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
  bool dashed = false;
};

struct Plot {
  std::string title;    // the question the figure answers
  std::string x_label;  // with its unit, e.g. "time (us)"
  std::string y_label;  // with its unit
  std::vector<PlotSeries> series;
  std::vector<std::string> caption;  // lines under the chart
  double y_min = 0;                  // the y axis starts here; its top is the data's maximum
  double x_min = 0;                  // the x axis starts here or at the data's minimum if lower
};

// Round tick values covering [lo, hi] (at most about `target` of them, steps of 1, 2 or 5 x 10^k).
std::vector<double> nice_ticks(double lo, double hi, int target);

// The SVG text of the chart.
std::string render_svg(const Plot& plot);

}  // namespace uroce::simlab
