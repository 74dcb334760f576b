/**
 * Curated tables behind the data generator: real MLS regions, real US cities with real postal
 * codes and coordinates, RESO Data Dictionary 2.0 lookup values (human-friendly standard names),
 * and a real-estate vocabulary. Every lookup value here is checked against the Data Dictionary in
 * test/generate.test.ts.
 */

export interface City {
  readonly name: string;
  readonly state: string;
  readonly county: string;
  /** Centre of the city. */
  readonly lat: number;
  readonly lon: number;
  /** Half-extent of the box listings are placed in, in degrees (roughly the city's size). */
  readonly dLat: number;
  readonly dLon: number;
  readonly postalCodes: readonly string[];
  /** Typical asking price per square foot of living area, in USD. */
  readonly pricePerSqft: number;
  /** UTC offset used for local open-house times (standard time), e.g. '-08:00'. */
  readonly utcOffset: string;
}

export interface Mls {
  /** OriginatingSystemName. */
  readonly code: string;
  readonly fullName: string;
  /** Prefix of ListingId, member and office MlsIds. */
  readonly idPrefix: string;
  /** Street suffix style this MLS's feed uses in StreetSuffix and UnparsedAddress. */
  readonly suffixStyle: 'abbreviation' | 'name';
  /** MlsStatus (the MLS's local status) for each StandardStatus. */
  readonly localStatus: Readonly<Record<string, string>>;
  readonly requiredUpdateFrequency: string;
  readonly cities: readonly City[];
}

const C = (
  name: string, state: string, county: string, lat: number, lon: number, dLat: number, dLon: number,
  postalCodes: string[], pricePerSqft: number, utcOffset: string,
): City => ({ name, state, county, lat, lon, dLat, dLon, postalCodes, pricePerSqft, utcOffset });

const defaultLocal = {
  Active: 'Active', 'Active Under Contract': 'Active Under Contract', Pending: 'Pending', Closed: 'Closed',
  'Coming Soon': 'Coming Soon', Expired: 'Expired', Canceled: 'Canceled', Withdrawn: 'Withdrawn', Hold: 'Hold',
};

export const MLS_TABLE: readonly Mls[] = [
  {
    code: 'CRMLS', fullName: 'California Regional Multiple Listing Service', idPrefix: 'CR', suffixStyle: 'abbreviation',
    localStatus: { ...defaultLocal, Closed: 'Sold', 'Active Under Contract': 'Active Under Contract', Canceled: 'Cancelled', Hold: 'Hold' },
    requiredUpdateFrequency: '12 hours',
    cities: [
      C('Los Angeles', 'CA', 'Los Angeles', 34.0522, -118.2437, 0.12, 0.16, ['90004', '90012', '90019', '90026', '90027', '90039', '90041', '90042', '90064', '90066'], 650, '-08:00'),
      C('San Diego', 'CA', 'San Diego', 32.7157, -117.1611, 0.09, 0.1, ['92101', '92103', '92104', '92107', '92109', '92116', '92117'], 600, '-08:00'),
      C('Irvine', 'CA', 'Orange', 33.6846, -117.8265, 0.05, 0.06, ['92602', '92603', '92604', '92606', '92612', '92614', '92618', '92620'], 700, '-08:00'),
    ],
  },
  {
    code: 'NWMLS', fullName: 'Northwest Multiple Listing Service', idPrefix: 'NW', suffixStyle: 'name',
    localStatus: { ...defaultLocal, Closed: 'Sold', 'Active Under Contract': 'Contingent', Hold: 'Temporarily Off Market' },
    requiredUpdateFrequency: '1 day',
    cities: [
      C('Seattle', 'WA', 'King', 47.6062, -122.3321, 0.09, 0.08, ['98101', '98103', '98105', '98107', '98109', '98115', '98117', '98118', '98122', '98125'], 520, '-08:00'),
      C('Bellevue', 'WA', 'King', 47.6101, -122.2015, 0.05, 0.06, ['98004', '98005', '98006', '98007', '98008'], 650, '-08:00'),
      C('Tacoma', 'WA', 'Pierce', 47.2529, -122.4443, 0.06, 0.07, ['98402', '98403', '98405', '98406', '98407'], 300, '-08:00'),
    ],
  },
  {
    code: 'ARMLS', fullName: 'Arizona Regional Multiple Listing Service', idPrefix: 'AZ', suffixStyle: 'abbreviation',
    localStatus: { ...defaultLocal, 'Active Under Contract': 'UCB (Under Contract-Backups)', Hold: 'Temp Off Market', Canceled: 'Cancelled' },
    requiredUpdateFrequency: '15 minutes',
    cities: [
      C('Phoenix', 'AZ', 'Maricopa', 33.4484, -112.074, 0.12, 0.14, ['85003', '85004', '85006', '85008', '85012', '85014', '85016', '85018', '85020'], 260, '-07:00'),
      C('Scottsdale', 'AZ', 'Maricopa', 33.4942, -111.9261, 0.08, 0.05, ['85250', '85251', '85254', '85255', '85257', '85258', '85259', '85260'], 380, '-07:00'),
      C('Mesa', 'AZ', 'Maricopa', 33.4152, -111.8315, 0.05, 0.1, ['85201', '85202', '85203', '85204', '85205', '85206'], 240, '-07:00'),
    ],
  },
  {
    code: 'HAR', fullName: 'Houston Association of Realtors', idPrefix: 'HR', suffixStyle: 'name',
    localStatus: { ...defaultLocal, Closed: 'Sold', 'Active Under Contract': 'Option Pending', Hold: 'Terminated' },
    requiredUpdateFrequency: '1 hour',
    cities: [
      C('Houston', 'TX', 'Harris', 29.7604, -95.3698, 0.14, 0.16, ['77002', '77003', '77004', '77006', '77007', '77008', '77019', '77024', '77025', '77098'], 180, '-06:00'),
      C('Katy', 'TX', 'Harris', 29.7858, -95.8245, 0.04, 0.05, ['77449', '77450', '77493', '77494'], 150, '-06:00'),
      C('Sugar Land', 'TX', 'Fort Bend', 29.6197, -95.6349, 0.04, 0.05, ['77478', '77479', '77498'], 170, '-06:00'),
    ],
  },
  {
    code: 'MRED', fullName: 'Midwest Real Estate Data', idPrefix: 'MR', suffixStyle: 'abbreviation',
    localStatus: { ...defaultLocal, 'Active Under Contract': 'Contingent', Hold: 'Temporarily No Showings', Canceled: 'Cancelled' },
    requiredUpdateFrequency: '4 hours',
    cities: [
      C('Chicago', 'IL', 'Cook', 41.8781, -87.6298, 0.12, 0.08, ['60601', '60605', '60607', '60610', '60614', '60618', '60622', '60625', '60640', '60657'], 260, '-06:00'),
      C('Evanston', 'IL', 'Cook', 42.0451, -87.6877, 0.02, 0.025, ['60201', '60202'], 300, '-06:00'),
      C('Naperville', 'IL', 'DuPage', 41.7508, -88.1535, 0.05, 0.06, ['60540', '60563', '60564', '60565'], 220, '-06:00'),
    ],
  },
  {
    code: 'NorthstarMLS', fullName: 'Regional Multiple Listing Service of Minnesota', idPrefix: 'NS', suffixStyle: 'name',
    localStatus: { ...defaultLocal, Closed: 'Sold', 'Active Under Contract': 'Contingent', Hold: 'Temporarily Not Available', Canceled: 'Cancelled' },
    requiredUpdateFrequency: '2 hours',
    cities: [
      C('Minneapolis', 'MN', 'Hennepin', 44.9778, -93.265, 0.07, 0.07, ['55401', '55403', '55405', '55406', '55407', '55408', '55409', '55410', '55414', '55418'], 230, '-06:00'),
      C('Saint Paul', 'MN', 'Ramsey', 44.9537, -93.09, 0.05, 0.08, ['55101', '55102', '55104', '55105', '55116'], 200, '-06:00'),
      C('Bloomington', 'MN', 'Hennepin', 44.8408, -93.2983, 0.04, 0.07, ['55420', '55425', '55431', '55437', '55438'], 210, '-06:00'),
    ],
  },
  {
    code: 'Stellar', fullName: 'Stellar MLS', idPrefix: 'ST', suffixStyle: 'abbreviation',
    localStatus: { ...defaultLocal, Closed: 'Sold', 'Active Under Contract': 'Pending Sale (Backups)', Hold: 'Temp Off Market', Canceled: 'Canceled' },
    requiredUpdateFrequency: '30 minutes',
    cities: [
      C('Tampa', 'FL', 'Hillsborough', 27.9506, -82.4572, 0.09, 0.08, ['33602', '33603', '33604', '33606', '33609', '33611', '33629'], 270, '-05:00'),
      C('Orlando', 'FL', 'Orange', 28.5383, -81.3792, 0.08, 0.09, ['32801', '32803', '32804', '32806', '32807', '32812', '32819'], 240, '-05:00'),
      C('Clearwater', 'FL', 'Pinellas', 27.9659, -82.8001, 0.05, 0.04, ['33755', '33756', '33759', '33761', '33764', '33765'], 280, '-05:00'),
    ],
  },
  {
    code: 'BrightMLS', fullName: 'Bright MLS', idPrefix: 'BR', suffixStyle: 'name',
    localStatus: { ...defaultLocal, 'Active Under Contract': 'Active Under Contract', Hold: 'Temp Off Market', Closed: 'Closed' },
    requiredUpdateFrequency: '1 week',
    cities: [
      C('Washington', 'DC', 'District of Columbia', 38.9072, -77.0369, 0.06, 0.07, ['20001', '20002', '20003', '20007', '20008', '20009', '20010', '20011', '20016'], 520, '-05:00'),
      C('Baltimore', 'MD', 'Baltimore City', 39.2904, -76.6122, 0.06, 0.07, ['21201', '21202', '21211', '21218', '21224', '21230', '21231'], 180, '-05:00'),
      C('Arlington', 'VA', 'Arlington', 38.8816, -77.091, 0.03, 0.04, ['22201', '22202', '22203', '22204', '22205', '22207', '22209'], 500, '-05:00'),
    ],
  },
];

/** StandardStatus with a realistic share of a multi-year feed. */
export const STANDARD_STATUS_WEIGHTS: ReadonlyArray<readonly [string, number]> = [
  ['Active', 28], ['Active Under Contract', 6], ['Pending', 8], ['Closed', 38], ['Coming Soon', 3],
  ['Expired', 6], ['Canceled', 4], ['Withdrawn', 5], ['Hold', 2],
];

/** PropertyType → weighted PropertySubType (all RESO standard names). */
export const PROPERTY_TYPES: ReadonlyArray<readonly [string, number, ReadonlyArray<readonly [string, number]>]> = [
  ['Residential', 66, [['Single Family Residence', 64], ['Condominium', 18], ['Townhouse', 12], ['Manufactured Home', 2], ['Cabin', 1], ['Stock Cooperative', 1], ['Manufactured On Land', 2]]],
  ['Residential Lease', 16, [['Single Family Residence', 40], ['Condominium', 25], ['Apartment', 25], ['Townhouse', 10]]],
  ['Residential Income', 5, [['Duplex', 50], ['Triplex', 20], ['Quadruplex', 15], ['Multi Family', 15]]],
  ['Land', 6, [['Unimproved Land', 100]]],
  ['Commercial Sale', 2, [['Office', 30], ['Retail', 30], ['Warehouse', 20], ['Mixed Use', 10], ['Industrial', 10]]],
  ['Commercial Lease', 2, [['Office', 40], ['Retail', 40], ['Warehouse', 10], ['Industrial', 10]]],
  ['Manufactured In Park', 2, [['Manufactured Home', 70], ['Mobile Home', 30]]],
  ['Farm', 1, [['Farm', 50], ['Ranch', 30], ['Agriculture', 20]]],
];

/** Lookup pools, in rough order of how often feeds carry them (picked with Zipf weights). */
export const LOOKUPS = {
  Appliances: ['Dishwasher', 'Disposal', 'Microwave', 'Refrigerator', 'Range', 'Gas Range', 'Electric Range', 'Dryer', 'Washer', 'Stainless Steel Appliance(s)', 'Range Hood', 'Gas Water Heater', 'Oven', 'Electric Water Heater', 'Ice Maker', 'Gas Oven', 'Electric Oven', 'Double Oven', 'Tankless Water Heater', 'Washer/Dryer', 'Free-Standing Range', 'Built-In Refrigerator', 'Wine Refrigerator', 'Convection Oven', 'Water Softener', 'Gas Cooktop', 'Induction Cooktop', 'Trash Compactor', 'Exhaust Fan', 'Instant Hot Water', 'Warming Drawer', 'ENERGY STAR Qualified Appliances', 'Water Purifier', 'Bar Fridge', 'Smart Appliance(s)'],
  ArchitecturalStyle: ['Traditional', 'Ranch', 'Contemporary', 'Craftsman', 'Colonial', 'Modern', 'Mid-Century Modern', 'Bungalow', 'Spanish', 'Mediterranean', 'Cape Cod', 'Tudor', 'Victorian', 'Farmhouse', 'Split Level', 'Prairie', 'Georgian', 'Pueblo', 'Art Deco', 'Cabin', 'A-Frame', 'Queen Anne', 'Dutch Colonial', 'Shotgun'],
  Heating: ['Forced Air', 'Central', 'Natural Gas', 'Electric', 'Heat Pump', 'Fireplace(s)', 'Radiant', 'Baseboard', 'Hot Water', 'Zoned', 'Ductless', 'Steam', 'Propane', 'Wall Furnace', 'Solar', 'Wood Stove', 'Geothermal', 'Radiant Floor'],
  Cooling: ['Central Air', 'Ceiling Fan(s)', 'Heat Pump', 'Electric', 'Zoned', 'Wall/Window Unit(s)', 'Ductless', 'Evaporative Cooling', 'Whole House Fan', 'Attic Fan', 'Dual', 'None'],
  InteriorFeatures: ['Ceiling Fan(s)', 'Walk-In Closet(s)', 'Open Floorplan', 'Kitchen Island', 'Granite Counters', 'High Ceilings', 'Pantry', 'Recessed Lighting', 'Breakfast Bar', 'Eat-in Kitchen', 'Vaulted Ceiling(s)', 'Crown Molding', 'Double Vanity', 'Stone Counters', 'Built-in Features', 'Soaking Tub', 'Master Downstairs', 'Entrance Foyer', 'Tray Ceiling(s)', 'Wet Bar', 'Bookcases', 'Smart Thermostat', 'Cathedral Ceiling(s)', 'Beamed Ceilings', 'In-Law Floorplan', 'Storage', 'Dry Bar', 'Coffered Ceiling(s)', 'Sound System', 'Wired for Data', 'Smart Home', 'Elevator', 'Sauna'],
  ParkingFeatures: ['Garage', 'Attached', 'Driveway', 'Garage Door Opener', 'Concrete', 'Off Street', 'On Street', 'Detached', 'Garage Faces Front', 'Assigned', 'Covered', 'Carport', 'Paved', 'Direct Access', 'Oversized', 'Tandem', 'Underground', 'Guest', 'Electric Vehicle Charging Station(s)', 'Alley Access', 'RV Access/Parking', 'Gated', 'Workshop in Garage', 'Circular Driveway'],
  WaterfrontFeatures: ['Waterfront', 'Lake Front', 'Canal Front', 'Bay Access', 'Beach Access', 'Ocean Front', 'River Front', 'Pond', 'Creek', 'Lake Privileges', 'Navigable Water', 'Seawall'],
  View: ['Neighborhood', 'City', 'Mountain(s)', 'Trees/Woods', 'Park/Greenbelt', 'Water', 'Lake', 'Golf Course', 'Hills', 'City Lights', 'Downtown', 'Ocean', 'Panoramic', 'Bay', 'Skyline', 'Territorial', 'Canyon', 'Valley', 'Pool', 'Garden', 'River', 'Bridge(s)'],
} as const satisfies Record<string, readonly string[]>;

/** Directionals (RESO StreetDirection lookup). */
export const DIRECTIONS = ['N', 'S', 'E', 'W', 'NE', 'NW', 'SE', 'SW'] as const;

/** USPS Publication 28 street suffixes in common use: [standard name, USPS abbreviation]. */
export const STREET_SUFFIXES: ReadonlyArray<readonly [string, string]> = [
  ['Street', 'St'], ['Avenue', 'Ave'], ['Drive', 'Dr'], ['Road', 'Rd'], ['Lane', 'Ln'], ['Court', 'Ct'],
  ['Boulevard', 'Blvd'], ['Way', 'Way'], ['Place', 'Pl'], ['Circle', 'Cir'], ['Terrace', 'Ter'],
  ['Parkway', 'Pkwy'], ['Trail', 'Trl'], ['Highway', 'Hwy'], ['Loop', 'Loop'], ['Square', 'Sq'],
];

/** Street names that occur across US cities (numbered, trees, people, landscape). */
export const STREET_NAMES: readonly string[] = [
  'Main', 'Oak', 'Pine', 'Maple', 'Cedar', 'Elm', 'Washington', 'Lake', 'Hill', 'Park', 'Walnut', 'Sunset',
  'Lincoln', 'Jackson', 'Church', 'Highland', 'Madison', 'Jefferson', 'Franklin', 'Willow', 'Adams', 'Spring',
  'Chestnut', 'Ridge', 'Meadow', 'Forest', 'Sycamore', 'Magnolia', 'Birch', 'Hickory', 'Dogwood', 'Aspen',
  'River', 'Lakeview', 'Valley', 'Prospect', 'Grant', 'Monroe', 'Wilson', 'Cherry', 'Laurel', 'Cypress',
  'Evergreen', 'Bayview', 'Colonial', 'Harbor', 'Mill', 'Center', 'Union', 'Broadway', 'Market', 'Jasmine',
  'Juniper', 'Canyon', 'Mesa', 'Palm', 'Vista', 'Orchard', 'College', 'Dover', 'Kensington', 'Hawthorne',
  'Greenwood', 'Woodland', 'Riverside', 'Fairview', 'Belmont', 'Clinton', 'Garfield', 'Hamilton', 'Lafayette',
  '1st', '2nd', '3rd', '4th', '5th', '6th', '7th', '8th', '9th', '10th', '11th', '12th', '14th', '15th',
  '16th', '18th', '21st', '23rd', '24th', '32nd', '35th', '40th', '45th', '56th', '65th', '75th',
];

export const FIRST_NAMES: readonly string[] = [
  'James', 'Mary', 'Robert', 'Patricia', 'John', 'Jennifer', 'Michael', 'Linda', 'David', 'Elizabeth', 'William',
  'Barbara', 'Richard', 'Susan', 'Joseph', 'Jessica', 'Thomas', 'Sarah', 'Christopher', 'Karen', 'Charles', 'Lisa',
  'Daniel', 'Nancy', 'Matthew', 'Betty', 'Anthony', 'Sandra', 'Mark', 'Margaret', 'Donald', 'Ashley', 'Steven',
  'Kimberly', 'Andrew', 'Emily', 'Paul', 'Donna', 'Joshua', 'Michelle', 'Kenneth', 'Carol', 'Kevin', 'Amanda',
  'Brian', 'Melissa', 'George', 'Deborah', 'Timothy', 'Stephanie', 'Ronald', 'Rebecca', 'Jason', 'Laura', 'Maria',
  'Jose', 'Sofia', 'Luis', 'Ana', 'Carlos', 'Mei', 'Wei', 'Priya', 'Raj', 'Aisha', 'Omar', 'Nguyen', 'Hana',
  'Zoë', 'José', 'Renée', 'Chloé', 'André',
];

export const LAST_NAMES: readonly string[] = [
  'Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Garcia', 'Miller', 'Davis', 'Rodriguez', 'Martinez',
  'Hernandez', 'Lopez', 'Gonzalez', 'Wilson', 'Anderson', 'Thomas', 'Taylor', 'Moore', 'Jackson', 'Martin', 'Lee',
  'Perez', 'Thompson', 'White', 'Harris', 'Sanchez', 'Clark', 'Ramirez', 'Lewis', 'Robinson', 'Walker', 'Young',
  'Allen', 'King', 'Wright', 'Scott', 'Torres', 'Nguyen', 'Hill', 'Flores', 'Green', 'Adams', 'Nelson', 'Baker',
  'Hall', 'Rivera', 'Campbell', 'Mitchell', 'Carter', 'Roberts', 'Chen', 'Patel', 'Kim', "O'Brien", 'Müller',
  'Núñez', 'Søren', 'Kowalski', 'Okafor', 'Haddad', 'Yamamoto', 'Schwartz', 'Cohen', 'Murphy', 'Sullivan',
];

export const OFFICE_WORDS: readonly string[] = [
  'Summit', 'Evergreen', 'Keystone', 'Harbor', 'Pinnacle', 'Cornerstone', 'Blue Door', 'Lakeside', 'Heritage',
  'Redwood', 'Sterling', 'Compass Point', 'Beacon', 'Meridian', 'Crescent', 'Oak Tree', 'Landmark', 'Northgate',
  'Parkview', 'Silver Oak', 'Main Street', 'Hometown', 'Urban Nest', 'Coastal', 'Prairie Wind', 'Skyline',
];
export const OFFICE_KINDS: readonly string[] = ['Realty', 'Real Estate', 'Properties', 'Realty Group', 'Homes', 'Brokers', 'Real Estate Co.'];

/**
 * Phrases of public remarks, most common first; picked with Zipf weights so word frequencies in
 * PublicRemarks follow the long-tailed shape of real listing text.
 */
export const REMARK_PHRASES: readonly string[] = [
  'Welcome home to this beautiful property.',
  'The updated kitchen features granite counters and stainless steel appliances.',
  'Spacious living room with plenty of natural light.',
  'The primary suite offers a walk-in closet and a private bath.',
  'Close to schools, shopping and parks.',
  'Hardwood floors throughout the main level.',
  'Enjoy the large backyard, perfect for entertaining.',
  'Move-in ready and freshly painted.',
  'Sparkling pool and covered patio.',
  'Open floor plan with a kitchen island that flows into the family room.',
  'Attached two-car garage with storage.',
  'Quiet street in a sought-after neighborhood.',
  'Easy access to the freeway and downtown.',
  'New roof and new HVAC system.',
  'Cozy fireplace in the family room.',
  'Granite countertops in the kitchen and baths.',
  'Community amenities include a clubhouse, pool and fitness center.',
  'Great investment opportunity.',
  'Laundry room with washer and dryer included.',
  'Vaulted ceilings and recessed lighting.',
  'Corner lot with mature trees and landscaping.',
  'Energy efficient windows and solar panels.',
  'Walk to restaurants, cafes and the farmers market.',
  'Bonus room upstairs can be used as an office or gym.',
  'Remodeled bathrooms with quartz vanities.',
  'Private balcony with city views.',
  'Low HOA dues.',
  'Fenced yard with room for a garden.',
  'Luxury vinyl plank flooring throughout.',
  'Chef kitchen with gas range and double oven.',
  'Finished basement with a wet bar.',
  'Mountain views from the deck.',
  'Waterfront living with a private dock.',
  'Pool and spa with a built-in barbecue.',
  'Tankless water heater and smart thermostat.',
  'Plenty of closet space.',
  'Seller is motivated; bring all offers.',
  'Walking distance to the light rail station.',
  'Split floor plan offers privacy.',
  'Lease includes water, sewer and trash.',
  'Pets considered with deposit.',
  'Located in a top-rated school district.',
  'Lovingly maintained by the original owners.',
  'Charming bungalow with original character.',
  'Tall ceilings and crown molding.',
  'Gated community with guard.',
  'Detached studio with separate entrance.',
  'Oversized lot with RV parking.',
  'Gourmet kitchen with quartz countertops.',
  'Stunning sunset views.',
  'Walk-in pantry and breakfast nook.',
  'Golf course lot.',
  'Lake access and community boat launch.',
  'Security system and ring doorbell.',
  'Newly installed sprinkler system.',
  'Plantation shutters throughout.',
  'Screened porch overlooking the preserve.',
  'Impact windows and hurricane shutters.',
  'Ceiling fans in every bedroom.',
  'Wine cellar and media room.',
  'Home warranty included.',
  'Zoned for mixed use.',
  'Cul-de-sac location.',
  'Xeriscape front yard.',
  'Historic district charm with modern updates.',
  'Heated floors in the primary bath.',
  'Commuter friendly location.',
  'Solar owned, not leased.',
  'Rooftop deck with skyline views.',
  'Elevator building with concierge.',
];

/** Words for the opening line of remarks. */
export const REMARK_ADJECTIVES: readonly string[] = ['charming', 'stunning', 'spacious', 'updated', 'bright', 'immaculate', 'inviting', 'modern', 'classic', 'renovated'];

export const PHOTO_ROOMS: readonly string[] = ['Front of Structure', 'Living Room', 'Kitchen', 'Dining Room', 'Master Bedroom', 'Bedroom', 'Bathroom', 'Master Bathroom', 'Family Room', 'Yard', 'Patio', 'Garage', 'Laundry', 'Pool', 'View', 'Aerial View', 'Back of Structure', 'Office', 'Deck'];
